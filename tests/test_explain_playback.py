"""Explain's playback: at time t the timeline draws exactly the actions the simulator started before t."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from app.explain import explain
from app.figures.playback import next_stop, start_times, started_before
from app.schedule_costs import LinkCost, StageCost

UNEVEN = (StageCost(), StageCost(F=25, B=40, W=5, L=30), StageCost(F=5, B=10, W=5, L=10))


def drawn(fig) -> Counter:
    """(row, lane, kind, micro-batch, chunk, start in µs) of every bar of the figure (-1: none)."""
    bars: Counter = Counter()
    for t in fig.data:
        if t.type != "bar":
            continue
        row = 1 if t.yaxis in (None, "y") else int(t.yaxis[1:])
        for base, custom in zip(np.asarray(t.base), np.asarray(t.customdata)):
            chunk = int(custom[4]) if len(custom) > 4 else -1
            bars[row, int(custom[0]), t.legendgroup, int(custom[1]), chunk, round(float(base) * 1e6)] += 1
    return bars


def expected(e, t_s: float) -> Counter:
    want: Counter = Counter()
    for row, played in enumerate(e.played, start=1):
        placed = played.placed
        for r in started_before(played.sim, t_s):
            a = r.action
            chunk = a.stage if placed and a.microbatch is not None else -1
            mb = -1 if a.microbatch is None else a.microbatch
            want[row, r.stage, a.kind.value, mb, chunk, round(round(r.start_s, 6) * 1e6)] += 1
    return want


# (backprop pipeline, K, m, t as a share of the longer step, costs, link)
CASES = [
    ("gpipe", 3, 4, 0.0, None, None),
    ("gpipe", 3, 4, 0.25, None, None),
    ("1f1b", 3, 4, 0.5, None, None),
    ("1f1b", 4, 8, 0.8, None, None),
    ("zb-h1", 3, 4, 0.6, None, None),
    ("dualpipe-v", 2, 4, 0.5, None, None),
    ("interleaved-1f1b", 3, 6, 0.45, None, None),
    ("gpipe", 3, 5, 0.4, UNEVEN, LinkCost(latency_ms=2, send_ms=1)),
    ("1f1b", 3, 3, 1.0, UNEVEN, None),
]


@pytest.mark.parametrize("bp, k, m, share, costs, link", CASES)
def test_the_actions_shown_at_t_are_exactly_those_the_simulator_started_before_t(bp, k, m, share, costs, link):
    end_ms = explain(stages=k, microbatches=m, bp_method=bp, stage_costs=costs, link=link).makespan_ms
    t_ms = share * max(end_ms.values())
    e = explain(stages=k, microbatches=m, bp_method=bp, stage_costs=costs, link=link, t_ms=t_ms)
    # the end of the step shows the whole step, the actions that start at its very end too
    assert drawn(e.timeline) == expected(e, math.inf if share == 1 else t_ms / 1e3)
    if share < 1:  # an action still running is drawn up to t: what comes after is not known yet
        assert all(b + w <= t_ms / 1e3 + 1e-6 for tr in e.timeline.data if tr.type == "bar"
                   for b, w in zip(np.asarray(tr.base), np.asarray(tr.x)))
    if share == 0:
        assert not drawn(e.timeline)  # nothing has started before t = 0
    if share == 1:  # the whole step: every action
        assert sum(drawn(e.timeline).values()) == sum(len(p.sim.records) for p in e.played)


def test_the_timeline_keeps_one_axis_while_it_plays():
    ranges = {tuple(explain(stages=3, microbatches=4, t_ms=t).timeline.layout.xaxis.range) for t in (5, 50, 500)}
    assert len(ranges) == 1


def test_each_stop_of_the_playback_adds_the_actions_that_start_there_in_order():
    e = explain(stages=3, microbatches=4, bp_method="1f1b")
    stops = start_times(e.played)
    assert list(stops) == sorted(stops) and stops[0] == 0.0
    assert stops[-1] == pytest.approx(max(e.makespan_ms.values()) / 1e3)
    shown = [sum(len(started_before(p.sim, t)) for p in e.played) for t in stops]
    assert shown == sorted(shown) and shown[0] == 0
    assert all(b > a for a, b in zip(shown, shown[1:-1]))  # every instant at which something starts adds it
    # stepping forward walks the stops one by one; stepping back from the end returns the way it came
    t, walked = 0.0, []
    for _ in stops[1:]:
        t = next_stop(e.played, t)
        walked.append(t)
    assert walked == list(stops[1:]) and next_stop(e.played, stops[-1]) == stops[-1]
    assert next_stop(e.played, stops[2], step=-1) == stops[1] and next_stop(e.played, 0.0, step=-1) == 0.0
