"""One vocabulary: every kind a lane can show has one category, and every view agrees with it."""
from __future__ import annotations

import pytest

from zerolock_core import schedule
from zerolock_core.config.run_config import FAILURE_MODES
from zerolock_core.viz.palette import KIND_COLOURS, KIND_LABELS
from zerolock_core.schedule.action import COMPUTE_KINDS, RECV_KINDS, SCHEDULE_KINDS, SEND_KINDS, Action
from zerolock_core.telemetry.activity import bubble_fraction, makespan_s, stage_stats
from zerolock_core.vocabulary import BUSY_KINDS, KIND_CATEGORY, Category, Kind, is_busy


@pytest.mark.parametrize("kind", list(Kind))
def test_every_lane_kind_has_a_category_a_colour_and_a_label(kind):
    assert kind in KIND_CATEGORY and kind in KIND_COLOURS and kind in KIND_LABELS


def test_the_schedules_kinds_are_the_vocabularys():
    assert schedule.Kind is Kind and set(SCHEDULE_KINDS) <= set(Kind)
    assert COMPUTE_KINDS == BUSY_KINDS
    assert SEND_KINDS == {Kind.SF, Kind.SB} and RECV_KINDS == {Kind.RF, Kind.RB}


@pytest.mark.parametrize("kind", [k for k in Kind if k not in SCHEDULE_KINDS])
def test_a_recorded_only_kind_is_no_schedule_action(kind):
    """RESTORE, RELINK, WAIT and STARTUP appear on a lane but a stage is never scheduled to do them."""
    with pytest.raises(ValueError, match="unknown action kind"):
        Action(stage=0, kind=kind, microbatch=0)
    with pytest.raises(ValueError, match="bad action string"):
        Action.parse(f"0{kind}0")


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


@pytest.mark.parametrize("mode", [*FAILURE_MODES, "crash"])
def test_every_failure_mode_has_one_word_and_an_injected_one_says_how_it_fails(mode):
    from zerolock_core.vocabulary import FAILURE_HOW, FAILURE_WORDS

    assert FAILURE_WORDS[mode] and (mode == "crash" or FAILURE_HOW[mode])
    assert len(set(FAILURE_WORDS.values())) == len(FAILURE_WORDS)  # no two modes share a word
