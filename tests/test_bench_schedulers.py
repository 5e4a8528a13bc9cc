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


def test_terminal_costs_its_chunks_before_the_last_as_chunks_that_do_not_train(probed):
    costs = probed.costs("terminal")
    last = max(probed.per_stage)
    for stage, c in probed.per_stage.items():
        trained = stage == last
        assert costs.compute_s(stage, Kind.F) == c["F_local" if trained else "F_frozen"]
        assert costs.compute_s(stage, Kind.L) == c["L" if trained else "L_frozen"]
        assert costs.compute_s(stage, Kind.STEP) == c["STEP" if trained else "STEP_frozen"]


def test_the_probe_times_a_frozen_chunk_with_the_worker_terminals_runtime_builds():
    from benchmarks.common.probe import frozen_worker, in_process_config
    from zerolock_core.config.run_config import replace
    from zerolock_core.train.run_setup import build_run_setup
    from zerolock_core.train.stage_worker import StageWorker

    cfg = replace(in_process_config(SETTINGS, method="terminal", stages=2, batch=4, microbatches=2),
                  objective={"alpha": (0.5,)})
    chunk = build_run_setup(cfg).chunks[0]
    runtime = StageWorker.of_run(chunk, cfg)
    probed = frozen_worker(StageWorker(chunk=chunk, alpha=runtime.alpha, consistency=runtime.consistency,
                                       microbatches=2, lr=1e-3, weight_decay=0.0))
    fields = ("trains", "agrees_with_upstream", "alpha", "consistency", "microbatches")
    assert {f: getattr(probed, f) for f in fields} == {f: getattr(runtime, f) for f in fields}
    assert runtime.trains is False


def unit_probe(stages: int, *, frozen: float = 1.0) -> ProbedCosts:
    """F = B_input = W = 1 on every stage (the paper's equal costs): a whole backward B = 2; a chunk that
    does not train (terminal's) costs `frozen` to forward and half that to read out."""
    one = {"F": 1.0, "F_local": 1.0, "L": 1.0, "B": 2.0, "B_input": 1.0, "W": 1.0, "STEP": 0.0,
           "F_frozen": frozen, "L_frozen": frozen / 2, "STEP_frozen": 0.0}
    return ProbedCosts(per_stage={s: dict(one) for s in range(stages)}, hidden_bytes=0, layers=[])


# the step of a long run on equal costs (F = 1, B = 2, L = 1; m = 2K): a flushing schedule idles its bubble
# every step, one that never flushes is as fast as its busiest stage's work per step
@pytest.mark.parametrize("method, step", [
    ("1f1b", lambda p, m: (m + p - 1) * 3.0),
    ("gpipe", lambda p, m: (m + p - 1) * 3.0),
    ("pipedream", lambda p, m: m * 3.0),
    ("zerolock", lambda p, m: m * 2.0),
    ("terminal", lambda p, m: m * 2.0),  # its last stage's forward and local step; the frozen ones keep up
])
@pytest.mark.parametrize("p", [2, 3, 4])
def test_the_steady_step_is_the_bubble_or_the_busiest_stage(method, step, p):
    from benchmarks.common.prediction import steady_step_s
    from zerolock_core.methods import schedule_of

    m = 2 * p
    got = steady_step_s(method=schedule_of(method), stages=p, microbatches=m, windows=4,
                        costs=unit_probe(p, frozen=0.5).costs(method), link=LinkProfile(), inflight_limit=2)
    assert got == pytest.approx(step(p, m))


def test_a_few_windows_from_the_first_start_charge_a_schedule_that_never_flushes_its_fill():
    """Why the frontier takes the steady step: over 5 windows terminal's fast first stage runs ahead, and
    the rate measured from its first start falls short of the last stage's."""
    from benchmarks.common.prediction import predict, steady_step_s

    costs, m = unit_probe(4, frozen=0.5).costs("terminal"), 8
    common = dict(method="zerolock", stages=4, microbatches=m, costs=costs, link=LinkProfile(), inflight_limit=2)
    short = predict(**common, batch=m, windows=6, skip_windows=1).samples_per_s
    assert short < m / steady_step_s(**common, windows=6) == pytest.approx(m / (2.0 * m))


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
