"""The live window read from the end of the event list (what the Watch tab draws every few seconds)
equals the window cut from the whole list: the same events, the same window length, the same memory
chart. Events arrive as the event files have them: each stage's in the order they end, the stages
interleaved by when they wrote."""
from __future__ import annotations

import json
import random

import pytest

from app.figures.memory import memory_figure
from app.figures.timebase import recent, recent_window_s, tail_since
from zerolock_core.telemetry.activity import stage_stats

KINDS = ["F", "SF", "RF", "L", "STEP"]


def written(stages: int, per_stage: int, seed: int, *, stall: int | None = None) -> list[dict]:
    """Each stage's actions back to back (random lengths), merged in the order they end (written),
    with a little write jitter between stages; `stall`: that stage stops halfway (a failure)."""
    rng = random.Random(seed)
    streams = []
    for s in range(stages):
        t, out = s * 1_000_000, []
        for i in range(per_stage // 2 if s == stall else per_stage):
            t0, t = t + rng.randrange(0, 200_000), t + rng.randrange(100_000, 5_000_000)
            out.append({"stage": s, "kind": KINDS[i % len(KINDS)], "mb": i, "t0": t0, "t1": t,
                        "act_bytes": rng.randrange(0, 4 << 20), "inflight": rng.randrange(0, 4), "step": i // 10,
                        "gen": 0})
        streams.append(out)
    # written when each ended, give or take a jitter that can swap close neighbours of two stages (one
    # stage writes its own in order)
    written_at = {}
    for stream in streams:
        last = 0
        for e in stream:
            last = written_at[id(e)] = max(last, e["t1"] + rng.randrange(0, 3_000_000))
    return sorted((e for stream in streams for e in stream), key=lambda e: written_at[id(e)])


CASES = [(2, 400, 0, None), (3, 300, 1, None), (4, 200, 2, 1), (1, 100, 3, None), (3, 300, 4, 0)]


@pytest.mark.parametrize("stages, per_stage, seed, stall", CASES)
@pytest.mark.parametrize("back_s", [0.0005, 0.01, 0.05, 0.3, 10.0])
def test_the_tail_holds_every_event_of_the_window_and_what_each_stage_held_before_it(stages, per_stage, seed,
                                                                                    stall, back_s):
    events = written(stages, per_stage, seed, stall=stall)
    cutoff = max(e["t1"] for e in events) - int(back_s * 1e9)
    tail = tail_since(events, cutoff, stages=stages)
    assert tail == events[len(events) - len(tail):]  # a suffix: the list's own order
    assert [e for e in events if e["t1"] >= cutoff] == [e for e in tail if e["t1"] >= cutoff]
    for s in range(stages):
        before = [e for e in events if e["stage"] == s and e["t1"] < cutoff]
        if before:
            assert max(before, key=lambda e: e["t1"]) in tail


@pytest.mark.parametrize("stages, per_stage, seed, stall", CASES)
@pytest.mark.parametrize("max_events", [10, 60, 300])
def test_the_live_window_from_the_tail_is_the_window_from_every_event(stages, per_stage, seed, stall, max_events):
    events = written(stages, per_stage, seed, stall=stall)
    assert recent_window_s(events, max_s=20.0, max_events=max_events, stages=stages) == \
        recent_window_s(events, max_s=20.0, max_events=max_events)


@pytest.mark.parametrize("stages, per_stage, seed, stall", CASES)
@pytest.mark.parametrize("measure", ["act_bytes", "inflight"])
def test_the_memory_chart_of_the_tail_with_the_runs_peaks_is_the_chart_of_every_event(stages, per_stage, seed,
                                                                                    stall, measure):
    events = written(stages, per_stage, seed, stall=stall)
    window = recent_window_s(events, max_s=20.0, max_events=60, stages=stages)
    origin = min(e["t0"] for e in events)
    tail = tail_since(events, max(e["t1"] for e in events) - int(window * 1e9), stages=stages)
    stats = stage_stats(events, stages=stages)
    peaks = [s.peak_act_bytes if measure == "act_bytes" else s.peak_inflight for s in stats]
    full = memory_figure(events, stages=stages, window_s=window, origin_ns=origin, measure=measure)
    cut = memory_figure(tail, stages=stages, window_s=window, origin_ns=origin, measure=measure, sampled_peaks=peaks)
    assert json.loads(cut.to_json()) == json.loads(full.to_json())
    assert recent(tail, window) == recent(events, window)


def test_sampled_peaks_need_one_value_per_stage():
    with pytest.raises(ValueError, match="one value per stage"):
        memory_figure(written(2, 10, 0), stages=2, sampled_peaks=[1.0])
