"""Interleaved 1F1B: v chunks per device, as schedule data and in the simulator (Explain only). Its order of
compute equals torch.distributed.pipelining's; its simulated bubble equals the textbook's (K−1)/(v·m+K−1)."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from zerolock_core.schedule import Costs, Kind, LinkProfile, Schedule, simulate
from zerolock_core.schedule.interleaved import build_interleaved_1f1b, interleaved_placement

# (devices, chunks per device, micro-batches) with a schedule: m a multiple of max(1, m // D)
GRID = [(d, v, m) for d in (2, 3, 4) for v in (2, 3) for m in range(1, 13) if m % max(1, m // d) == 0]
IDEAL = LinkProfile.profile("ideal")


@functools.cache
def _build(devices: int, v: int, m: int, windows: int = 1) -> Schedule:
    return build_interleaved_1f1b(devices=devices, chunks_per_device=v, microbatches=m, windows=windows)


def _torch_compute(devices: int, v: int, m: int) -> list[list[str]]:
    from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops

    return [[str(op) for op in row if op is not None]
            for row in get_schedule_ops("Interleaved1F1B", devices, m, num_stages_per_rank=v)]


def test_interleaved_on_two_devices_two_chunks_and_four_micro_batches_is_this_table():
    compute = [[str(a) for a in row if a.is_compute] for row in _build(2, 2, 4).actions]
    assert compute == [
        ["0F0", "0F1", "2F0", "2F1", "0F2", "2B0", "0F3", "2B1", "2F2", "0B0", "2F3", "0B1", "2B2", "2B3", "0B2",
         "0B3", "0STEP"],
        ["1F0", "1F1", "3F0", "3B0", "3F1", "3B1", "1F2", "1B0", "1F3", "1B1", "3F2", "3B2", "3F3", "3B3", "1B2",
         "1B3", "1STEP"],
    ]


@pytest.mark.parametrize("devices, v, m", GRID)
def test_interleaved_computes_in_torchs_order(devices, v, m):
    ours = [[str(a) for a in row if a.is_compute and a.kind is not Kind.STEP] for row in _build(devices, v, m).actions]
    assert ours == _torch_compute(devices, v, m)


@pytest.mark.parametrize("devices, v", [(2, 2), (3, 2), (4, 3)])
def test_interleaved_places_chunk_s_on_device_s_mod_d(devices, v):
    sched = _build(devices, v, devices)
    assert interleaved_placement(devices, v) == tuple(s % devices for s in range(devices * v))
    assert sched.stages == devices * v and sched.devices == devices
    assert all(sched.device_of(a.stage) == d for d, row in enumerate(sched.actions) for a in row)


@pytest.mark.parametrize("devices, v, m", GRID)
@pytest.mark.parametrize("windows", [1, 2])
def test_interleaved_runs_every_chunks_f_and_b_once_per_micro_batch_without_deadlock(devices, v, m, windows):
    sched = _build(devices, v, m, windows)
    sim = simulate(sched, costs=Costs(forward=1.0, backward=2.0), link=IDEAL)
    done = Counter((r.action.stage, r.action.kind) for r in sim.records if r.action.kind in (Kind.F, Kind.B))
    assert done == {(s, k): m * windows for s in range(devices * v) for k in (Kind.F, Kind.B)}
    assert Counter(r.stage for r in sim.records if r.action.kind is Kind.STEP) == {d: windows for d in range(devices)}


@pytest.mark.parametrize("devices, v, m", [(d, v, m) for d, v, m in GRID if m % d == 0])
def test_interleaved_bubble_is_the_textbooks_with_uniform_chunks_and_an_ideal_link(devices, v, m):
    """Narayanan et al.: (K−1)/(v·m) of the compute, i.e. (K−1)/(v·m+K−1) of the step, each chunk 1/v of a stage."""
    sim = simulate(_build(devices, v, m), costs=Costs(forward=1.0 / v, backward=2.0 / v), link=IDEAL)
    assert sim.bubble_fraction == pytest.approx((devices - 1) / (v * m + devices - 1))


@pytest.mark.parametrize("kwargs, words", [
    (dict(devices=1, chunks_per_device=2, microbatches=4), "devices must be an int >= 2"),
    (dict(devices=2, chunks_per_device=1, microbatches=4), "chunks_per_device must be an int >= 2"),
    (dict(devices=2, chunks_per_device=2, microbatches=0), "microbatches must be an int >= 1"),
    (dict(devices=4, chunks_per_device=2, microbatches=9), "m must be a multiple of 2"),
])
def test_interleaved_refuses_counts_it_has_no_schedule_for(kwargs, words):
    with pytest.raises(ValueError, match=words):
        build_interleaved_1f1b(**kwargs)
