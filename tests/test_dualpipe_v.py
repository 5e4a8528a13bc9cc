"""DualPipe-V: two chunks per device in a V, as schedule data and in the simulator (the runtime runs one
stage per process and refuses it). Its order of compute equals torch.distributed.pipelining's."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from zerolock_core.schedule import (
    Costs,
    Kind,
    LinkProfile,
    Schedule,
    build_schedule,
    inflight_peak,
    iter_stage_actions,
    schedulable,
    simulate,
)
from zerolock_core.schedule.dualpipe_v import DUALPIPE_V, dualpipe_v_placement

# every (devices, micro-batches) a test walks: m from the least DualPipe-V needs (2D) to 4D
GRID = [(d, m) for d in range(1, 7) for m in sorted({2 * d, 2 * d + 1, 3 * d, 4 * d})]
IDEAL = LinkProfile.profile("ideal")


@functools.cache
def _build(devices: int, m: int, windows: int = 1) -> Schedule:
    return build_schedule(DUALPIPE_V, stages=devices, microbatches=m, windows=windows)


def _compute(row) -> list[str]:
    return [str(a) for a in row if a.is_compute and a.kind is not Kind.STEP]


def _torch_compute(devices: int, m: int) -> list[list[str]]:
    """torch's own order, its words in ours: I -> B, a full backward -> B then W, an overlapped pair in
    the order of its two sub-actions."""
    from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops

    def words(op) -> list[str]:
        if op.sub_actions:
            return [w for sub in op.sub_actions for w in words(sub)]
        s, j = op.stage_index, op.microbatch_index
        return {"FORWARD": [f"{s}F{j}"], "BACKWARD_INPUT": [f"{s}B{j}"], "BACKWARD_WEIGHT": [f"{s}W{j}"],
                "FULL_BACKWARD": [f"{s}B{j}", f"{s}W{j}"]}[op.computation_type.name]

    return [[w for op in row if op is not None for w in words(op)] for row in get_schedule_ops("DualPipeV", devices, m)]


def test_dualpipe_v_on_two_devices_and_four_micro_batches_is_this_table():
    assert _build(2, 4).to_strings() == (
        ("0F0", "0SF0", "0F1", "0SF1", "0F2", "0SF2", "3RF0", "3F0", "3B0", "3SB0", "3W0", "3RF1", "3F1", "0F3",
         "0SF3", "3B1", "3SB1", "3W1", "3RF2", "3F2", "0RB0", "0B0", "0W0", "3B2", "3SB2", "3W2", "3RF3", "3F3",
         "0RB1", "0B1", "0W1", "3B3", "3SB3", "3W3", "0RB2", "0B2", "0W2", "0RB3", "0B3", "0W3", "0STEP"),
        ("1RF0", "1F0", "2F0", "2SF0", "1RF1", "1F1", "2F1", "2SF1", "1RF2", "1F2", "2RB0", "2B0", "2W0", "2F2",
         "2SF2", "1B0", "1SB0", "1W0", "1RF3", "1F3", "2RB1", "2B1", "2W1", "2F3", "2SF3", "1B1", "1SB1", "1W1",
         "2RB2", "2B2", "2W2", "1B2", "1SB2", "1W2", "2RB3", "2B3", "1B3", "1SB3", "2W3", "1W3", "1STEP"),
    )


@pytest.mark.parametrize("devices, m", [(d, m) for d, m in GRID if d <= 5])
def test_dualpipe_v_computes_in_torchs_order(devices, m):
    assert [_compute(row) for row in _build(devices, m).actions] == _torch_compute(devices, m)


@pytest.mark.parametrize("devices", range(1, 7))
def test_dualpipe_v_places_chunk_d_and_its_mirror_on_device_d(devices):
    placement = dualpipe_v_placement(devices)
    assert len(placement) == 2 * devices
    assert all(placement[d] == placement[2 * devices - 1 - d] == d for d in range(devices))
    assert _build(devices, 2 * devices).stages == 2 * devices and _build(devices, 2 * devices).devices == devices


@pytest.mark.parametrize("devices, m", GRID)
@pytest.mark.parametrize("windows", [1, 2])
def test_dualpipe_v_runs_every_chunks_f_b_w_once_per_micro_batch_without_deadlock(devices, m, windows):
    sched = _build(devices, m, windows)
    sched.steps()  # raises Deadlock if it cannot finish
    counts = Counter((a.stage, a.kind, a.microbatch) for row in sched.actions for a in row if a.is_compute)
    expected = {(s, k, i) for s in range(2 * devices) for k in (Kind.F, Kind.B, Kind.W) for i in range(m * windows)}
    assert {key for key, n in counts.items() if key[1] is not Kind.STEP} == expected
    assert all(n == 1 for key, n in counts.items() if key[1] is not Kind.STEP)
    assert [sum(a.kind is Kind.STEP for a in row) for row in sched.actions] == [windows] * devices


@pytest.mark.parametrize("devices, m", GRID)
def test_dualpipe_v_hands_off_locally_at_the_turn_in_dependency_order(devices, m):
    """Stages D-1 and D share the last device: no send between them, and the row itself orders F of D-1
    before F of D and B of D before B of D-1 for every micro-batch; B before W everywhere."""
    sched = _build(devices, m)
    row = sched.actions[devices - 1]
    where = {(a.stage, a.kind, a.microbatch): n for n, a in enumerate(row)}
    for i in range(m):
        assert where[devices - 1, Kind.F, i] < where[devices, Kind.F, i]
        assert where[devices, Kind.B, i] < where[devices - 1, Kind.B, i]
    assert not any(a.peer is not None and sched.device_of(a.peer) == devices - 1 for a in row)
    for s in range(2 * devices):
        acts = sched.for_stage(s)
        pos = {(a.kind, a.microbatch): n for n, a in enumerate(acts)}
        assert all(pos[Kind.B, i] < pos[Kind.W, i] for i in range(m))


@pytest.mark.parametrize("devices, m", [(d, m) for d, m in GRID if d >= 2])
def test_dualpipe_v_on_half_chunks_finishes_no_later_than_zb_h1_and_1f1b(devices, m):
    """The same work on D devices: 1F1B and ZB-H1 with one stage per device, DualPipe-V with two chunks of
    half the layers each (F:B:W = 1:2:1, as the zero-bubble paper's F = B = W with B split in two)."""
    whole, half = Costs(forward=2, backward=4, weight_grad=2), Costs(forward=1, backward=2, weight_grad=1)
    span = {method: simulate(build_schedule(method, stages=devices, microbatches=m), costs=whole,
                             link=IDEAL).makespan_s for method in ("1f1b", "zb-h1")}
    v = simulate(_build(devices, m), costs=half, link=IDEAL)
    assert v.makespan_s <= span["zb-h1"] < span["1f1b"]
    # ... and every device holds 2D + 1 chunk-micro-batches at its peak: D + 1/2 stages' worth
    assert v.inflight_peak == (2 * devices + 1,) * devices
    # a device's two half chunks compute as much as one 1F1B stage: m x (F + B) = 6m
    assert len(v.busy_s) == devices and all(b == pytest.approx(6 * m) for b in v.busy_s)


@pytest.mark.parametrize("devices, m", GRID)
def test_a_devices_simulated_peak_lies_between_its_chunks_largest_and_their_sum(devices, m):
    """The analysis reads each chunk's peak off the order; the device holds both chunks' micro-batches."""
    sched = _build(devices, m)
    device_peak = simulate(sched, costs=Costs(), link=IDEAL).inflight_peak
    for d in range(devices):
        chunks = [inflight_peak(sched, s) for s in (d, 2 * devices - 1 - d)]
        assert max(chunks) <= device_peak[d] <= sum(chunks)


@pytest.mark.parametrize("devices, m, ok", [(1, 1, False), (1, 2, True), (3, 5, False), (3, 6, True), (4, 7, False)])
def test_dualpipe_v_needs_twice_as_many_micro_batches_as_devices(devices, m, ok):
    assert schedulable(DUALPIPE_V, stages=devices, microbatches=m) is ok
    if not ok:
        with pytest.raises(ValueError, match=r"dualpipe-v needs microbatches >= 2 x devices"):
            build_schedule(DUALPIPE_V, stages=devices, microbatches=m)


def test_the_runtime_refuses_dualpipe_v_with_one_line_naming_why():
    with pytest.raises(ValueError, match="one stage per process: it is schedule data for the simulator"):
        iter_stage_actions(DUALPIPE_V, stage=0, stages=2, microbatches=4)


@pytest.mark.parametrize("rows, placement, message", [
    ([["0F0"], ["1F0"], []], (0, 1, 1), r"placement \(0, 1, 1\) must name a device in 0..2 for each of the 3 "
                                         r"stages, every device holding at least one"),
    ([["0F0"], ["1F0"]], (0, 1, 2), r"must name a device in 0..1"),
    ([["0F0", "2F0"], ["1F0"]], (0, 1, 1, 0), r"action 2F0 is listed under device 0"),
    ([["0F0", "0SF0"], ["1RF0", "1F0", "1SF0", "2RF0", "2F0"]], (0, 1, 1, 0),
     r"action 1SF0: stages 1 and 2 share device 1, their hand-off is local"),
])
def test_a_placed_schedule_refuses_inconsistent_rows(rows, placement, message):
    from zerolock_core.schedule import Action
    with pytest.raises(ValueError, match=message):
        Schedule(method="custom", stages=len(placement), microbatches=1,
                 actions=[[Action.parse(t) for t in row] for row in rows], placement=placement)


def test_speeds_are_per_device_when_chunks_are_placed():
    """A device half as fast stretches both its chunks; the other device's busy time is unchanged."""
    half = Costs(forward=1, backward=2, weight_grad=1)
    even = simulate(_build(2, 4), costs=half, link=IDEAL)
    slow = simulate(_build(2, 4), costs=Costs(forward=1, backward=2, weight_grad=1, speeds=(1.0, 0.5)), link=IDEAL)
    assert slow.busy_s[0] == even.busy_s[0] and slow.busy_s[1] == pytest.approx(2 * even.busy_s[1])
