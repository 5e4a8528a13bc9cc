"""`bench schedulers` and what it stands on: the probe's split backward (B_input, W) per stage, the simulator
fed with probed costs, and the report's fields (its pipeline runs stood in for: no process is spawned)."""
from __future__ import annotations

import pytest

from benchmarks.common.probe import PROBED, ProbedCosts, probe_costs
from benchmarks.common.settings import BenchSettings
from zerolock_core.schedule import Kind, LinkProfile, build_schedule, simulate

SETTINGS = BenchSettings(seq_len=16, steps=2, threads=1)


@pytest.fixture(scope="module")
def probed() -> ProbedCosts:
    return probe_costs(SETTINGS, stages=2, batch=4, microbatches=2, repeats=1)


def test_probe_records_every_cost_positive_for_every_stage(probed):
    assert sorted(probed.per_stage) == [0, 1]
    for stage, costs in probed.per_stage.items():
        assert set(costs) == set(PROBED), stage
        assert all(costs[k] > 0 for k in PROBED), (stage, costs)


@pytest.mark.parametrize("method, forward, backward, weight", [
    ("zb-h1", "F", ("B_input", "W"), "W"),  # the split as run: B_input, then W
    ("1f1b", "F", ("B",), None),  # one whole backward, nothing split off
    ("gpipe", "F", ("B",), None),
    ("zerolock", "F_local", ("B",), None),  # its forward keeps no input gradient
])
def test_probed_costs_give_each_method_its_own_forward_and_backward(probed, method, forward, backward, weight):
    costs = probed.costs(method)
    for stage, c in probed.per_stage.items():
        assert costs.compute_s(stage, Kind.F) == c[forward]
        assert costs.compute_s(stage, Kind.B) == pytest.approx(sum(c[k] for k in backward))
        assert costs.compute_s(stage, Kind.W) == (c[weight] if weight else 0.0)
        if weight:  # what the simulator runs as B and W is what was recorded as B_input and W
            assert costs.split_backward_s(stage) == pytest.approx((c["B_input"], c["W"]))


def unit_probe(stages: int) -> ProbedCosts:
    """F = B_input = W = 1 on every stage (the paper's equal costs): a whole backward B = 2."""
    one = {"F": 1.0, "F_local": 1.0, "L": 1.0, "B": 2.0, "B_input": 1.0, "W": 1.0, "STEP": 0.0}
    return ProbedCosts(per_stage={s: dict(one) for s in range(stages)}, hidden_bytes=0, layers=[])


@pytest.mark.parametrize("method, bubble", [
    ("zb-h1", lambda p, m: (p - 1) / (3 * m + p - 1)),  # idles (p-1)(F + B - W) = p-1 beside 3m of work
    ("1f1b", lambda p, m: (p - 1) / (m + p - 1)),  # idles (p-1)(F + B + W) = 3(p-1)
])
@pytest.mark.parametrize("p, m", [(2, 2), (2, 4), (3, 6), (4, 4), (4, 8), (8, 16)])
def test_the_simulator_fed_probed_equal_costs_idles_the_textbook_bubble(method, bubble, p, m):
    result = simulate(build_schedule(method, stages=p, microbatches=m), costs=unit_probe(p).costs(method),
                      link=LinkProfile())
    assert result.bubble_fraction == pytest.approx(bubble(p, m))


def measured_row(every_repeat: list[float]) -> dict:
    """What measure.measured gives for one method (the fields the report reads), over its repeats."""
    return {"samples_per_s": max(every_repeat), "samples_per_s_every_repeat": every_repeat, "bubble_fraction": 0.2,
            "active_fraction": [0.8, 0.8], "peak_inflight": [2, 1], "peak_activation_bytes": [2**20, 2**19]}


# samples/s per round: zb-h1 beats 1F1B in two rounds of three, its best run is slower than 1F1B's best
REPEATS = {"1f1b": [10.0, 8.0, 12.0], "zb-h1": [11.0, 8.8, 6.0], "zerolock": [15.0, 12.0, 18.0], "gpipe": [9, 8, 9]}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from benchmarks import schedulers
    from benchmarks.common.pipeline_runs import PipelineRuns

    def fake_measure_all(settings, *, runs, probes, cases):
        return [{"method": c["method"], "measured": measured_row(REPEATS[c["method"]])} for c in cases]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schedulers, "measure_all", fake_measure_all)
        return schedulers.run_schedulers(SETTINGS, runs=PipelineRuns(tmp_path_factory.mktemp("sched"), repeats=3),
                                         stages=2, batch=4, microbatches=2, simulate_at=(2, 3))


@pytest.mark.parametrize("method, paired, best", [
    ("1f1b", 0.0, 0.0),
    ("zb-h1", 0.1, 11 / 12 - 1),  # the median of +10 %, +10 %, -50 %; best against best
    ("zerolock", 0.5, 0.5),
])
def test_measured_ratios_are_against_the_1f1b_run_of_each_round(report, method, paired, best):
    r = report["measured"]["results"][method]
    assert r["vs_1f1b"] == pytest.approx(paired) and r["vs_1f1b_best"] == pytest.approx(best)
    assert len(r["vs_1f1b_every_repeat"]) == 3


def test_the_report_names_its_model_and_simulates_every_method_at_every_k(report):
    from benchmarks.schedulers import SCHEDULERS, SIMULATED_ONLY, figures, format_report, format_verdict

    assert report["bench"] == "schedulers" and report["model"] == "tiny"
    assert report["measured"]["stages"] == 2 and list(report["measured"]["results"]) == list(SCHEDULERS)
    sim = report["simulated"]
    assert [(r["stages"], r["microbatches"], r["method"]) for r in sim["rows"]] == [
        (k, 2 * k, m) for k in (2, 3) for m in SCHEDULERS + SIMULATED_ONLY]
    for r in sim["rows"]:
        assert 0 <= r["bubble_fraction"] < 1 and len(r["peak_inflight"]) == r["stages"], r
        assert r["method"] != "1f1b" or r["vs_1f1b"] == 0.0
    # DualPipe-V on K devices: 2K chunks, each device's held micro-batches in stages' worth (K + 1/2)
    for r in (r for r in sim["rows"] if r["method"] == "dualpipe-v"):
        assert r["chunks"] == 2 * r["stages"] and len(r["layers"]) == 2 * r["stages"]
        assert r["peak_inflight"] == [r["stages"] + 0.5] * r["stages"]
    assert [len(p["w_share"]) for p in sim["probes"]] == [2, 3]
    assert max(r["peak_inflight"][0] for r in sim["rows"] if r["method"] == "zerolock") == 1
    text = format_report(report)
    assert "vs 1F1B (median of rounds)" in text and "SIMULATED" in text
    assert set(figures(report)) == {"schedulers"}
    verdict = format_verdict([report]).splitlines()
    assert len(verdict) == 2 + len(SCHEDULERS) + len(SIMULATED_ONLY) and "K = 2 / 3" in verdict[0]
    assert "dualpipe-v | not run (simulated only)" in verdict[-1]


def test_dualpipe_v_is_skipped_with_its_reason_where_the_model_has_fewer_layers_than_chunks():
    from benchmarks.common.measure import Probes
    from benchmarks.schedulers import dualpipe_v_row

    row = dualpipe_v_row(SETTINGS, Probes(settings=SETTINGS), devices=5, microbatch_size=2, baseline=1.0)
    assert row["method"] == "dualpipe-v" and row["chunks"] == 10 and "layers" in row["skipped"]


@pytest.mark.parametrize("keywords, message", [
    (dict(methods=("zerolock", "zb-h1")), "--methods must include 1f1b"),
    (dict(batch=5, microbatches=2), "must be a multiple of --microbatches"),
])
def test_bad_schedulers_arguments_are_one_line_value_errors(tmp_path, keywords, message):
    from benchmarks.common.pipeline_runs import PipelineRuns
    from benchmarks.schedulers import run_schedulers

    geometry = {"stages": 2, "batch": 4, "microbatches": 2, **keywords}
    with pytest.raises(ValueError, match=message):
        run_schedulers(SETTINGS, runs=PipelineRuns(tmp_path), **geometry)
