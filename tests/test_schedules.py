"""Schedules: action strings, builders (exact tables), structural invariants, static analysis."""

from __future__ import annotations

import functools
import math
import pickle
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from zerolock_core.schedule import (
    iter_stage_actions,
    METHODS,
    Action,
    Deadlock,
    Kind,
    Schedule,
    build_schedule,
    inflight_peak,
    max_stashed_versions,
    schedulable,
    stale_backwards,
    weight_version_of_backward,
    weight_version_of_forward,
)


@functools.cache
def _build(method: str, k: int, m: int, w: int) -> Schedule:
    return build_schedule(method, stages=k, microbatches=m, windows=w)


def _grid(methods=METHODS, ks=range(1, 9), ms=range(1, 17), windows=(1, 2)):
    for method in methods:
        for k in ks:
            for m in ms:
                if not schedulable(method, stages=k, microbatches=m):
                    continue
                for w in windows:
                    yield method, k, m, w


# --- action strings -------------------------------------------------------------------------

@pytest.mark.parametrize(
    "text, stage, kind, micro",
    [
        ("1F3", 1, Kind.F, 3),
        ("0SF2", 0, Kind.SF, 2),
        ("2RB0", 2, Kind.RB, 0),
        ("1L3", 1, Kind.L, 3),
        ("0STEP", 0, Kind.STEP, None),
        ("0CKPT", 0, Kind.CKPT, None),
        ("3REPLAY7", 3, Kind.REPLAY, 7),
        ("1RF0", 1, Kind.RF, 0),
        ("1SB0", 1, Kind.SB, 0),
        ("12B105", 12, Kind.B, 105),
    ],
)
def test_action_string_round_trip(text, stage, kind, micro):
    action = Action.parse(text)
    assert (action.stage, action.kind, action.microbatch) == (stage, kind, micro)
    assert str(action) == text
    assert Action.parse(str(Action(stage=stage, kind=kind, microbatch=micro))) == action


@pytest.mark.parametrize(
    "text",
    ["", "F3", "1", "1X3", "1F", "1f3", "1F-3", "-1F3", "01F3", "1F03", " 1F3", "1F3 ",
     "0STEP1", "0CKPT2", "1REPLAY", "0RF0", "0SB1", "1SF", "1S F3"],
)
def test_bad_action_strings_are_rejected_naming_the_string(text):
    with pytest.raises(ValueError, match="bad action string") as info:
        Action.parse(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(
    "kwargs",
    [dict(stage=-1, kind="F", microbatch=0), dict(stage=0, kind="Q", microbatch=0),
     dict(stage=0, kind="F"), dict(stage=0, kind="STEP", microbatch=1), dict(stage=True, kind="F", microbatch=0),
     dict(stage=0, kind="B", microbatch=-2), dict(stage=0, kind="RF", microbatch=0)],
)
def test_bad_action_fields_are_rejected(kwargs):
    with pytest.raises(ValueError):
        Action(**kwargs)


@pytest.mark.parametrize(
    "text, counterpart, peer",
    [("0SF2", "1RF2", 1), ("1RF2", "0SF2", 0), ("2SB0", "1RB0", 1), ("1RB0", "2SB0", 2)],
)
def test_counterpart_and_peer(text, counterpart, peer):
    action = Action.parse(text)
    assert str(action.counterpart()) == counterpart
    assert action.peer == peer
    assert action.message == action.counterpart().message


# --- exact schedules, written out by hand ----------------------------------------------------

EXPECTED = [
    ("zerolock", 2, 2, 1, 0, [
        "0F0 0SF0 0L0 0F1 0SF1 0L1 0STEP",
        "1RF0 1F0 1L0 1RF1 1F1 1L1 1STEP",
    ]),
    ("zerolock", 3, 1, 2, 1, [
        "0F0 0SF0 0L0 0STEP 0CKPT 0F1 0SF1 0L1 0STEP 0CKPT",
        "1RF0 1F0 1SF0 1L0 1STEP 1CKPT 1RF1 1F1 1SF1 1L1 1STEP 1CKPT",
        "2RF0 2F0 2L0 2STEP 2CKPT 2RF1 2F1 2L1 2STEP 2CKPT",
    ]),
    ("gpipe", 2, 2, 1, 0, [
        "0F0 0SF0 0F1 0SF1 0RB0 0B0 0RB1 0B1 0STEP",
        "1RF0 1F0 1RF1 1F1 1B0 1SB0 1B1 1SB1 1STEP",
    ]),
    ("gpipe", 2, 1, 2, 2, [
        "0F0 0SF0 0RB0 0B0 0STEP 0F1 0SF1 0RB1 0B1 0STEP 0CKPT",
        "1RF0 1F0 1B0 1SB0 1STEP 1RF1 1F1 1B1 1SB1 1STEP 1CKPT",
    ]),
    ("1f1b", 2, 2, 1, 0, [
        "0F0 0SF0 0F1 0SF1 0RB0 0B0 0RB1 0B1 0STEP",
        "1RF0 1F0 1B0 1SB0 1RF1 1F1 1B1 1SB1 1STEP",
    ]),
    ("1f1b", 3, 3, 1, 0, [
        "0F0 0SF0 0F1 0SF1 0F2 0SF2 0RB0 0B0 0RB1 0B1 0RB2 0B2 0STEP",
        "1RF0 1F0 1SF0 1RF1 1F1 1SF1 1RB0 1B0 1SB0 1RF2 1F2 1SF2 1RB1 1B1 1SB1 1RB2 1B2 1SB2 1STEP",
        "2RF0 2F0 2B0 2SB0 2RF1 2F1 2B1 2SB1 2RF2 2F2 2B2 2SB2 2STEP",
    ]),
    ("1f1b", 2, 2, 2, 0, [
        "0F0 0SF0 0F1 0SF1 0RB0 0B0 0RB1 0B1 0STEP 0F2 0SF2 0F3 0SF3 0RB2 0B2 0RB3 0B3 0STEP",
        "1RF0 1F0 1B0 1SB0 1RF1 1F1 1B1 1SB1 1STEP 1RF2 1F2 1B2 1SB2 1RF3 1F3 1B3 1SB3 1STEP",
    ]),
    ("pipedream", 2, 2, 2, 0, [
        "0F0 0SF0 0F1 0SF1 0RB0 0B0 0F2 0SF2 0RB1 0B1 0STEP 0F3 0SF3 0RB2 0B2 0RB3 0B3 0STEP",
        "1RF0 1F0 1B0 1SB0 1RF1 1F1 1B1 1SB1 1STEP 1RF2 1F2 1B2 1SB2 1RF3 1F3 1B3 1SB3 1STEP",
    ]),
    # W of micro-batch j - s right after B j on stage s, the last s W's after the window's last B
    ("zb-h1", 2, 2, 1, 0, [
        "0F0 0SF0 0F1 0SF1 0RB0 0B0 0W0 0RB1 0B1 0W1 0STEP",
        "1RF0 1F0 1B0 1SB0 1RF1 1F1 1B1 1SB1 1W0 1W1 1STEP",
    ]),
    ("zb-h1", 3, 3, 1, 0, [
        "0F0 0SF0 0F1 0SF1 0F2 0SF2 0RB0 0B0 0W0 0RB1 0B1 0W1 0RB2 0B2 0W2 0STEP",
        "1RF0 1F0 1SF0 1RF1 1F1 1SF1 1RB0 1B0 1SB0 1RF2 1F2 1SF2 1RB1 1B1 1SB1 1W0 1RB2 1B2 1SB2 1W1 1W2 1STEP",
        "2RF0 2F0 2B0 2SB0 2RF1 2F1 2B1 2SB1 2RF2 2F2 2B2 2SB2 2W0 2W1 2W2 2STEP",
    ]),
    ("zb-h1", 2, 2, 2, 1, [
        "0F0 0SF0 0F1 0SF1 0RB0 0B0 0W0 0RB1 0B1 0W1 0STEP 0CKPT "
        "0F2 0SF2 0F3 0SF3 0RB2 0B2 0W2 0RB3 0B3 0W3 0STEP 0CKPT",
        "1RF0 1F0 1B0 1SB0 1RF1 1F1 1B1 1SB1 1W0 1W1 1STEP 1CKPT "
        "1RF2 1F2 1B2 1SB2 1RF3 1F3 1B3 1SB3 1W2 1W3 1STEP 1CKPT",
    ]),
    ("zerolock", 1, 2, 1, 0, ["0F0 0L0 0F1 0L1 0STEP"]),
    ("gpipe", 1, 1, 1, 0, ["0F0 0B0 0STEP"]),
]


@pytest.mark.parametrize("method, k, m, w, ckpt, rows", EXPECTED)
def test_schedule_matches_hand_written_table(method, k, m, w, ckpt, rows):
    sched = build_schedule(method, stages=k, microbatches=m, windows=w, checkpoint_every=ckpt)
    assert sched.to_strings() == tuple(tuple(row.split()) for row in rows)
    assert (sched.method, sched.stages, sched.microbatches, sched.windows) == (method, k, m, w)
    assert Schedule.from_strings([r.split() for r in rows], method=method, microbatches=m, windows=w) == sched


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(method="dualpipe", stages=2, microbatches=2), "unknown schedule method 'dualpipe'"),
        (dict(method="gpipe", stages=0, microbatches=2), "stages must be an int >= 1 (got 0)"),
        (dict(method="gpipe", stages=2, microbatches=0), "microbatches must be an int >= 1 (got 0)"),
        (dict(method="gpipe", stages=2, microbatches=2, windows=0), "windows must be an int >= 1 (got 0)"),
        (dict(method="zerolock", stages=2, microbatches=2, checkpoint_every=-1), "checkpoint_every must be"),
        (dict(method="zerolock", stages=2.0, microbatches=2), "stages must be an int"),
        (dict(method="1f1b", stages=4, microbatches=3), "1f1b needs microbatches >= stages (got m=3, K=4)"),
        (dict(method="zb-h1", stages=3, microbatches=2), "zb-h1 needs microbatches >= stages (got m=2, K=3)"),
    ],
)
def test_build_schedule_rejects_bad_input(kwargs, message):
    kwargs = dict(kwargs)
    method = kwargs.pop("method")
    with pytest.raises(ValueError, match=re.escape(message)):
        build_schedule(method, **kwargs)


@pytest.mark.parametrize(
    "rows, message",
    [
        ([["0F0"], ["0F1"]], "listed under stage 1"),
        ([["0F0", "0SF0"]], "no peer stage"),
        ([["1RB0"], []], "listed under stage 0"),
    ],
)
def test_schedule_rejects_inconsistent_actions(rows, message):
    with pytest.raises(ValueError, match=message):
        Schedule.from_strings(rows)


# --- structural invariants over the whole grid ----------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_structural_invariants(method):
    for _, k, m, w in _grid(methods=[method]):
        sched = _build(method, k, m, w)
        sends = Counter(a.message for row in sched.actions for a in row if a.is_send)
        recvs = Counter(a.message for row in sched.actions for a in row if a.is_recv)
        assert sends == recvs and max(sends.values(), default=1) == 1, (method, k, m, w)
        ids = set(range(m * w))
        for s, row in enumerate(sched.actions):
            seen: dict[tuple[Kind, int], int] = {}
            for pos, a in enumerate(row):
                assert a.stage == s
                if a.microbatch is not None:
                    assert (a.kind, a.microbatch) not in seen, a
                    seen[(a.kind, a.microbatch)] = pos
            kinds = Counter(a.kind for a in row)
            assert kinds[Kind.STEP] == w
            assert {i for kind, i in seen if kind is Kind.F} == ids
            for (kind, i), pos in seen.items():
                if kind is Kind.F and s > 0:
                    assert seen[(Kind.RF, i)] < pos
                if kind in (Kind.B, Kind.L):
                    assert seen[(Kind.F, i)] < pos
                if kind is Kind.SF:
                    assert seen[(Kind.F, i)] < pos
                if kind is Kind.SB:
                    assert seen[(Kind.B, i)] < pos
                if kind is Kind.RB:
                    assert pos < seen[(Kind.B, i)]
                if kind is Kind.W:  # the weight gradient of a split backward, after its B
                    assert seen[(Kind.B, i)] < pos
            if method == "zerolock":
                assert not kinds[Kind.B] + kinds[Kind.SB] + kinds[Kind.RB]
                assert {i for kind, i in seen if kind is Kind.L} == ids
                if s < k - 1:
                    assert all(seen[(Kind.SF, i)] < seen[(Kind.L, i)] for i in ids)  # early forwarding
            else:
                assert not kinds[Kind.L]
                assert {i for kind, i in seen if kind is Kind.B} == ids
                assert {i for kind, i in seen if kind is Kind.W} == (ids if sched.splits_backward else set())
            for step_pos in (p for p, a in enumerate(row) if a.kind is Kind.STEP):
                window_ids = set(range(m * (sum(1 for a in row[:step_pos] if a.kind is Kind.STEP)),
                                       m * (1 + sum(1 for a in row[:step_pos] if a.kind is Kind.STEP))))
                done = {a.microbatch for a in row[:step_pos] if a.kind in sched.release_kinds}
                assert window_ids <= done  # a window's update follows all its backwards


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("windows, every, expected", [(1, 0, 0), (4, 1, 4), (4, 2, 2), (5, 2, 2), (3, 5, 0)])
def test_checkpoint_follows_step_every_nth_window(method, windows, every, expected):
    sched = build_schedule(method, stages=3, microbatches=3, windows=windows, checkpoint_every=every)
    for row in sched.actions:
        ckpts = [p for p, a in enumerate(row) if a.kind is Kind.CKPT]
        assert len(ckpts) == expected
        steps = [p for p, a in enumerate(row) if a.kind is Kind.STEP]
        assert ckpts == [steps[n * every - 1] + 1 for n in range(1, expected + 1)]


def test_method_name_is_case_insensitive():
    assert build_schedule("GPipe", stages=2, microbatches=2) == build_schedule("gpipe", stages=2, microbatches=2)


# --- printable grid ------------------------------------------------------------------------

def test_grid_is_unit_step_execution():
    sched = build_schedule("zerolock", stages=2, microbatches=1)
    assert sched.grid() == "\n".join([
        "step | stage 0 | stage 1",
        "0    | 0F0     |",
        "1    | 0SF0    |",
        "2    | 0L0     | 1RF0",
        "3    | 0STEP   | 1F0",
        "4    |         | 1L0",
        "5    |         | 1STEP",
    ])
    assert str(sched).startswith("zerolock schedule: K=2 m=1 windows=1\nstep | stage 0")


@pytest.mark.parametrize("method", METHODS)
def test_steps_contain_every_action_once_in_stage_order(method):
    sched = build_schedule(method, stages=4, microbatches=5, windows=2)
    for s in range(sched.stages):
        column = tuple(row[s] for row in sched.steps() if row[s] is not None)
        assert column == sched.for_stage(s)


def test_grid_of_broken_schedule_raises_deadlock():
    sched = Schedule.from_strings([["0RB0", "0F0", "0SF0"], ["1RF0", "1F0", "1B0", "1SB0"]])
    with pytest.raises(Deadlock, match=r"stage 0 waits at 0RB0.*stage 1 waits at 1RF0"):
        sched.grid()


def test_for_stage_rejects_unknown_stage():
    with pytest.raises(ValueError, match=r"stage must be in 0..1"):
        build_schedule("gpipe", stages=2, microbatches=2).for_stage(2)


# --- static analysis -----------------------------------------------------------------------

def _expected_peak(method: str, k: int, m: int, w: int, s: int) -> int:
    # zb-h1: stage s keeps the graphs of its s micro-batches awaiting W besides 1F1B's K - s
    return {"gpipe": m, "1f1b": k - s, "zerolock": 1, "pipedream": min(k - s, m * w), "zb-h1": k}[method]


@pytest.mark.parametrize("method", METHODS)
def test_inflight_peak(method):
    for _, k, m, w in _grid(methods=[method]):
        sched = _build(method, k, m, w)
        for s in range(k):
            assert inflight_peak(sched, s) == _expected_peak(method, k, m, w, s), (k, m, w, s)


@pytest.mark.parametrize("method", ["zerolock", "gpipe", "1f1b", "zb-h1"])
def test_synchronous_methods_need_no_stash(method):
    for _, k, m, w in _grid(methods=[method], ks=range(1, 6), ms=range(1, 9), windows=(1, 3)):
        sched = build_schedule(method, stages=k, microbatches=m, windows=w)
        for s in range(k):
            assert max_stashed_versions(sched, s) == 1
            assert stale_backwards(sched, s) == ()
            for i in range(m * w):
                assert weight_version_of_forward(sched, s, i) == weight_version_of_backward(sched, s, i) == i // m


@pytest.mark.parametrize("k", range(1, 7))
@pytest.mark.parametrize("m", range(1, 6))
def test_pipedream_stash_bound(k, m):
    for w in (1, 2, 3, 12, 13):
        sched = build_schedule("pipedream", stages=k, microbatches=m, windows=w)
        for s in range(k):
            d = k - s - 1
            steady = 1 + math.ceil(d / m)
            got = max_stashed_versions(sched, s)
            assert got <= min(k - s, steady)
            if m * w >= 2 * d and w >= steady:
                assert got == steady, (k, m, w, s)
            if w >= 12:
                assert got == steady  # bounded: more windows never need more versions


@pytest.mark.parametrize(
    "stage, micro, forward, backward",
    [(0, 0, 0, 0), (0, 1, 0, 0), (0, 2, 0, 1), (0, 3, 1, 1), (1, 2, 1, 1), (1, 3, 1, 1)],
)
def test_pipedream_weight_versions_k2_m2(stage, micro, forward, backward):
    sched = build_schedule("pipedream", stages=2, microbatches=2, windows=2)
    assert weight_version_of_forward(sched, stage, micro) == forward
    assert weight_version_of_backward(sched, stage, micro) == backward
    assert stale_backwards(sched, 0) == (Action.parse("0B2"),)
    assert max_stashed_versions(sched, 0) == 2 and max_stashed_versions(sched, 1) == 1


def test_weight_version_of_missing_action_is_an_error():
    sched = build_schedule("zerolock", stages=2, microbatches=2)
    with pytest.raises(ValueError, match="no forward"):
        weight_version_of_forward(sched, 0, 9)
    assert weight_version_of_backward(sched, 1, 1) == 0  # zerolock's backward is L


def test_deadlock_survives_pickling():
    sched = Schedule.from_strings([["0RB0", "0F0", "0SF0"], ["1RF0", "1F0", "1B0", "1SB0"]])
    with pytest.raises(Deadlock) as info:
        sched.steps()
    copy = pickle.loads(pickle.dumps(info.value))
    assert str(copy) == str(info.value) and copy.stuck == info.value.stuck


def test_package_is_pure_python():
    code = "import sys, zerolock_core.schedule; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("stages,microbatches,windows,every", [(1, 1, 1, 0), (3, 4, 5, 2), (4, 4, 3, 1), (2, 8, 2, 0)])
def test_a_stage_reads_exactly_the_built_schedule_one_action_at_a_time(method, stages, microbatches, windows, every):
    built = build_schedule(method, stages=stages, microbatches=microbatches, windows=windows, checkpoint_every=every)
    for s in range(stages):
        lazy = iter_stage_actions(method, stage=s, stages=stages, microbatches=microbatches, windows=windows,
                                  checkpoint_every=every)
        assert tuple(lazy) == built.for_stage(s)


@pytest.mark.parametrize("method", ["zerolock", "pipedream"])
def test_a_million_step_schedule_costs_a_few_actions_of_memory(method):
    import itertools
    import tracemalloc

    tracemalloc.start()
    try:
        lazy = iter_stage_actions(method, stage=1, stages=3, microbatches=4, windows=1_000_000, checkpoint_every=5)
        first = list(itertools.islice(lazy, 1000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert first[:2] == [Action.parse("1RF0"), Action.parse("1F0")] and peak < 2**20
