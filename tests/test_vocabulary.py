"""One vocabulary: every kind a lane can show has one category, and every view agrees with it."""
from __future__ import annotations

import pytest

from zerolock_core.schedule.action import COMPUTE_KINDS, RECV_KINDS, SEND_KINDS, Kind
from zerolock_core.telemetry.activity import bubble_fraction, makespan_s, stage_stats
from zerolock_core.vocabulary import BUSY_KINDS, KIND_CATEGORY, Category, is_busy


def test_every_schedule_action_and_every_recorded_kind_has_a_category():
    assert {k.value for k in Kind} <= set(KIND_CATEGORY)
    assert {"RESTORE", "RELINK", "STARTUP"} <= set(KIND_CATEGORY)
    assert {k.value for k in COMPUTE_KINDS} == BUSY_KINDS
    assert {k.value for k in SEND_KINDS} == {"SF", "SB"} and {k.value for k in RECV_KINDS} == {"RF", "RB"}


@pytest.mark.parametrize("kind,busy", [("F", True), ("L", True), ("B", True), ("REPLAY", True), ("CKPT", True),
                                       ("STEP", True), ("RF", False), ("SB", False), ("RESTORE", False),
                                       ("RELINK", False), ("STARTUP", False), ("SOMETHING-NEW", False)])
def test_only_compute_is_busy(kind, busy):
    assert is_busy(kind) is busy


def test_a_restore_and_an_outage_are_idle_in_the_activity():
    ms = 10**6
    ev = lambda s, kind, t0, t1: {"stage": s, "kind": kind, "mb": 0, "t0": t0 * ms, "t1": t1 * ms}  # noqa: E731
    events = [ev(0, "F", 0, 10), ev(0, "RESTORE", 50, 60), ev(0, "REPLAY", 60, 70), ev(0, "RELINK", 70, 80),
              ev(1, "RF", 0, 40), ev(1, "L", 40, 100)]
    a0, a1 = stage_stats(events, stages=2)
    assert (a0.busy_s, a0.span_s, a0.idle_s) == (0.02, 0.08, pytest.approx(0.06))
    assert a1.active_fraction == pytest.approx(0.6)
    assert makespan_s(events) == 0.1
    assert bubble_fraction([a0, a1], 0.1) == pytest.approx(1 - (0.02 + 0.06) / 2 / 0.1)
    assert Category.RECOVERY.value == "recovery"
