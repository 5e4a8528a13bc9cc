"""The per-stage numbers folded event by event (the dashboard adds only the new events each second)
equal the numbers of the whole list at once, however the events arrive in pieces."""
from __future__ import annotations

import pytest

from zerolock_core.rundir.run_dir import RunDir
from app.controller import Tracked
from zerolock_core.config.run_config import RunConfig, TrainConfig
from zerolock_core.telemetry.activity import ActivityFold, makespan_s, stage_stats

KINDS = ["F", "SF", "RF", "L", "STEP", "CKPT"]


def events(n: int, stages: int = 3) -> list[dict]:
    return [{"stage": i % stages, "kind": KINDS[i % len(KINDS)], "mb": i, "t0": 1000 + i * 10**6 - (i % 5) * 10**5,
             "t1": 1000 + i * 10**6 + (i % 7) * 10**5, "act_bytes": (i * 37) % 1000, "inflight": i % 4,
             "sent": i % 3, "recv": (i + 1) % 3, "step": i // 12, "gen": 0} for i in range(n)]


@pytest.mark.parametrize("cuts", [(), (1,), (10, 11, 50), tuple(range(0, 100, 7)), (99,)])
def test_folding_in_pieces_equals_folding_at_once(cuts):
    every = events(100)
    fold = ActivityFold(stages=3)
    for a, b in zip((0, *cuts), (*cuts, len(every))):
        fold.add(every[a:b])
    assert fold.events == len(every)
    assert fold.stats() == stage_stats(every, stages=3)
    assert fold.makespan_s == pytest.approx(makespan_s(every))


def test_no_events_fold_to_zeros():
    fold = ActivityFold(stages=2)
    assert fold.makespan_s == 0.0 and [s.actions for s in fold.stats()] == [0, 0]


def test_a_run_folds_only_new_events_and_afresh_when_its_list_was_replaced(tmp_path):
    cfg = RunConfig(train=TrainConfig(runtime="pipeline", stages=3, steps=50)).to_dict()
    t = Tracked(name="r", rd=RunDir(tmp_path), cfg=cfg, method="zerolock", batch="", events=events(30))
    first = t.activity()
    t.events.extend(events(60)[30:])
    assert t.activity() is first and first.events == 60  # the same fold, 30 events more
    assert t.stage_stats() == stage_stats(events(60), stages=3) and t.span_s() == pytest.approx(makespan_s(events(60)))
    t.events[:] = events(10)  # shorter: not a continuation
    assert t.activity().events == 10 and t.stage_stats() == stage_stats(events(10), stages=3)


H = 4096  # one micro-batch's hidden state


def wire(stage: int, kind: str, mb: int | None, nbytes: int, gen: int = 0) -> dict:
    side = "sent" if kind in ("SF", "SB", "RELINK") else "recv"
    return {"stage": stage, "kind": kind, "mb": mb, "t0": 0, "t1": 1, "act_bytes": 0, "inflight": 0, "step": 0,
            "gen": gen, "sent": nbytes if side == "sent" else 0, "recv": nbytes if side == "recv" else 0}


# (what happened, events, stage 0 (sent, resent), stage 1 (received, received again))
WIRE_CASES = [
    ("no failure", [wire(0, "SF", mb, H) for mb in range(3)] + [wire(1, "RF", mb, H) for mb in range(3)],
     (3 * H, 0), (3 * H, 0)),
    # stage 1 dies having received mb 0 and 1 (mb 2 in flight); its replacement needs 1 on: stage 0 resends
    # 1 and 2 in its RELINK, the replacement receives both
    ("downstream killed", [wire(0, "SF", mb, H) for mb in range(3)] + [wire(1, "RF", 0, H), wire(1, "RF", 1, H),
                           wire(0, "RELINK", None, 2 * H), wire(1, "RF", 1, H, gen=1), wire(1, "RF", 2, H, gen=1)],
     (3 * H, 2 * H), (3 * H, H)),
    # stage 1 dies while stage 0 sends mb 2: that send fails, the RELINK sends 1 again and 2 for the first time
    # (the SF run again after it finds 2 delivered: 0 bytes)
    ("downstream killed mid-send", [wire(0, "SF", 0, H), wire(0, "SF", 1, H), wire(1, "RF", 0, H),
                                    wire(1, "RF", 1, H), {**wire(0, "RELINK", None, 2 * H), "resends": [[1, H], [2, H]]},
                                    wire(0, "SF", 2, 0), wire(1, "RF", 1, H, gen=1), wire(1, "RF", 2, H, gen=1)],
     (3 * H, H), (3 * H, H)),
    # stage 0 dies after sending mb 0 and 1 (1 lost on the way); its replacement replays and sends 1 again
    ("upstream killed", [wire(0, "SF", 0, H), wire(0, "SF", 1, H), wire(1, "RF", 0, H),
                         wire(0, "SF", 1, H, gen=1), wire(0, "SF", 2, H, gen=1), wire(1, "RF", 1, H),
                         wire(1, "RF", 2, H)],
     (3 * H, H), (3 * H, 0)),
]


@pytest.mark.parametrize("what,evs,upstream,downstream", WIRE_CASES, ids=[c[0] for c in WIRE_CASES])
def test_each_microbatch_counts_once_per_link_across_restarts_and_what_crossed_again_apart(
        what, evs, upstream, downstream):
    s0, s1 = stage_stats(evs, stages=2)
    assert (s0.bytes_sent, s0.bytes_resent) == upstream
    assert (s1.bytes_received, s1.bytes_received_again) == downstream
    assert s0.bytes_sent == s1.bytes_received  # everything arrived: the link's two ends agree


@pytest.mark.parametrize("what,evs,upstream,downstream", WIRE_CASES, ids=[c[0] for c in WIRE_CASES])
def test_compacted_events_keep_each_cases_split(what, evs, upstream, downstream):
    """A RELINK is kept whole by the compaction while the sends it is measured against are folded into rows:
    it keeps the split it had, so the totals do not change."""
    from zerolock_core.telemetry.compaction import compact, expand, is_row

    flat = [x for r in compact(evs) for x in (expand(r) if is_row(r) else [r])]
    s0, s1 = stage_stats(flat, stages=2)
    assert (s0.bytes_sent, s0.bytes_resent) == upstream
    assert (s1.bytes_received, s1.bytes_received_again) == downstream
