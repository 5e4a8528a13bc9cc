"""ZB-H1 (zero bubble, Qi et al. 2024): its order against torch's, deadlock-freedom, and its bubble against
the paper's (p - 1)(T_F + T_B - T_W) on the simulator."""
from __future__ import annotations

from unittest import mock

import pytest

from zerolock_core.schedule import Costs, Kind, LinkProfile, build_schedule, simulate

IDEAL = LinkProfile()
COMPUTE = (Kind.F, Kind.B, Kind.W)


def torch_zb1p_order(stages: int, microbatches: int) -> list[list[str]]:
    """Each rank's compute order in torch's ScheduleInterleavedZeroBubble with one stage per rank (its
    ZB1P = ZB-H1 without interleaving), as "F3" / "B3" (torch's I: the input gradient) / "W3"."""
    from torch.distributed.pipelining.schedules import ScheduleInterleavedZeroBubble
    from torch.distributed.pipelining.stage import PipelineStage

    stage = mock.create_autospec(PipelineStage, instance=True)  # as torch's own _schedule_visualizer does
    stage.group_rank, stage.group_size, stage.submod, stage.num_stages = 0, stages, None, stages
    order = ScheduleInterleavedZeroBubble([stage], microbatches).pipeline_order
    code = {"F": "F", "I": "B", "W": "W"}
    return [[f"{code[a.computation_type.value]}{a.microbatch_index}" for a in order[r] if a is not None]
            for r in range(stages)]


def torch_accepts(stages: int, microbatches: int) -> bool:
    """torch's zero-bubble schedules need m to be a multiple of its rounds, max(1, m // K)."""
    return microbatches % max(1, microbatches // stages) == 0


CROSS_CHECK = [(k, m) for k in range(1, 7) for m in range(k, 3 * k + 1) if torch_accepts(k, m)]


@pytest.mark.parametrize("k, m", CROSS_CHECK)
def test_zb_h1_computes_in_torchs_zero_bubble_order(k, m):
    ours = build_schedule("zb-h1", stages=k, microbatches=m)
    theirs = torch_zb1p_order(k, m)
    for s in range(k):
        assert [f"{a.kind}{a.microbatch}" for a in ours.for_stage(s) if a.kind in COMPUTE] == theirs[s], s


def test_torch_refuses_the_counts_left_out_of_the_cross_check():
    from torch.distributed.pipelining.schedules import ScheduleInterleavedZeroBubble  # noqa: F401

    with pytest.raises(ValueError, match="multiple of the number of rounds"):
        torch_zb1p_order(2, 5)
    assert not torch_accepts(2, 5) and build_schedule("zb-h1", stages=2, microbatches=5).steps()


@pytest.mark.parametrize("k", range(1, 9))
@pytest.mark.parametrize("per_k", [1, 2])
@pytest.mark.parametrize("windows", [1, 3])
def test_zb_h1_never_deadlocks_for_m_of_k_and_2k(k, per_k, windows):
    sched = build_schedule("zb-h1", stages=k, microbatches=per_k * k, windows=windows)
    assert sum(1 for row in sched.steps() for a in row if a is not None) == sum(map(len, sched.actions))
    link = LinkProfile(bandwidth_bytes_per_s=32.0, latency_s=0.5)
    costs = Costs(forward=1.0, backward=2.0, weight_grad=0.5, hidden_bytes=64, grad_bytes=64)
    for limit in (None, 2):
        assert simulate(sched, costs=costs, link=link, inflight_limit=limit).makespan_s > 0


@pytest.mark.parametrize("k", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("per_k", [1, 2, 3])
@pytest.mark.parametrize("t_f, t_b, t_w", [(1.0, 2.0, 1.0), (1.0, 2.0, 0.5), (1.0, 2.0, 0.0), (2.0, 3.0, 1.0)])
def test_zb_h1_idles_the_papers_p_minus_1_times_f_plus_b_minus_w(k, per_k, t_f, t_b, t_w):
    """t_b is a whole backward, so the paper's T_B (the input gradient) is t_b - t_w; 1F1B idles
    (p - 1)(T_F + T_B + T_W) on the same work."""
    m, costs = per_k * k, Costs(forward=t_f, backward=t_b, weight_grad=t_w)
    zb = simulate(build_schedule("zb-h1", stages=k, microbatches=m), costs=costs, link=IDEAL)
    one_f = simulate(build_schedule("1f1b", stages=k, microbatches=m), costs=costs, link=IDEAL)
    work = m * (t_f + t_b)
    assert zb.makespan_s == work + (k - 1) * (t_f + (t_b - t_w) - t_w)
    assert one_f.makespan_s == work + (k - 1) * (t_f + t_b)
    assert zb.busy_s == one_f.busy_s == (work,) * k


def test_with_f_b_w_equal_zb_h1_idles_a_third_of_1f1b():
    k, m = 4, 8
    costs = Costs(forward=1.0, backward=2.0, weight_grad=1.0)
    idle = {method: simulate(build_schedule(method, stages=k, microbatches=m), costs=costs, link=IDEAL).idle_s
            for method in ("1f1b", "zb-h1")}
    assert [3 * z for z in idle["zb-h1"]] == list(idle["1f1b"])


def test_a_split_b_costs_the_whole_backward_less_its_w():
    sched = build_schedule("zb-h1", stages=2, microbatches=2)
    costs = Costs(forward=1.0, backward=3.0, weight_grad=1.0, per_stage={1: {"W": 0.5}})
    result = simulate(sched, costs=costs, link=IDEAL)
    seconds = {str(r.action): r.end_s - r.start_s for r in result.records}
    assert (seconds["0B0"], seconds["0W0"], seconds["1B0"], seconds["1W0"]) == (2.0, 1.0, 2.5, 0.5)
    assert simulate(build_schedule("1f1b", stages=2, microbatches=2), costs=costs,
                    link=IDEAL).record_of("0B0").end_s - result.record_of("0B0").start_s >= 3.0


@pytest.mark.parametrize("kwargs, message", [
    (dict(backward=1.0, weight_grad=2.0), "weight_grad (2.0 s) is part of a backward"),
    (dict(weight_grad=-1.0), "weight_grad must be a finite number of seconds"),
])
def test_costs_refuse_a_weight_gradient_outside_the_backward(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Costs(**kwargs)


def test_a_stage_override_of_w_above_b_is_refused_when_simulated():
    costs = Costs(backward=1.0, per_stage={0: {"W": 2.0}})
    with pytest.raises(ValueError, match="stage 0: W \\(2 s\\) is part of a backward"):
        simulate(build_schedule("zb-h1", stages=2, microbatches=2), costs=costs, link=IDEAL)
