"""`zerolock bench frontier`: its pure parts on hand-made numbers, and a tiny end-to-end study whose rerun
runs nothing."""

import hashlib
import math
import statistics
from pathlib import Path

import pytest

from benchmarks import depth, frontier as F
from benchmarks.common.settings import BenchSettings
from zerolock_core.rundir.atomic_files import write_json_atomic

CURVE = [(2, 0.40), (4, 0.70), (6, 0.85), (8, 0.86)]

SUMMARY_FIELDS = ["task", "K", "arm", "seeds", "steps", "locking", "accuracy_mean", "accuracy_sd", "reaches_bp",
                  "time_to_bp_vs_1f1b", "step_time_vs_1f1b", "activation_peak_vs_1f1b", "trainable_vs_bp"]


@pytest.mark.parametrize("target,step_s,expected", [
    (0.40, 1.5, 3.0),    # reached at the first eval
    (0.70, 2.0, 8.0),    # exactly at the target counts
    (0.80, 2.0, 12.0),   # reached late
    (0.86, 0.5, 4.0),    # only at the last eval
    (0.90, 2.0, None),   # never
    (0.40, None, None),  # no time for this arm
])
def test_time_to_accuracy(target, step_s, expected):
    got = F.time_to_accuracy(CURVE, target, step_s)
    assert got == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize("finals,expected", [
    ([0.80], 0.80),                                  # one seed: no spread to take off
    ([0.70, 0.90], 0.80 - statistics.stdev([0.7, 0.9])),
    ([0.50, 0.50, 0.50], 0.50),
    ([0.80, 0.84, 0.88], 0.84 - 0.04),
])
def test_target_is_bp_mean_less_one_seed_sd(finals, expected):
    assert F.bp_target(finals) == pytest.approx(expected)


def _run(seed, accuracy, nll=None, steps=(2, 4, 6, 8)):
    nll = list(nll or [1.0] * len(steps))
    return {"seed": seed, "step": list(steps), "accuracy": list(accuracy), "nll": nll,
            "final": {"accuracy": accuracy[-1], "nll": nll[-1]}}


NLL_CURVE = [(2, 3.0), (4, 2.5), (6, 2.1), (8, 2.2)]


@pytest.mark.parametrize("target,expected", [
    (3.5, 2.0),   # reached at the first eval
    (2.5, 4.0),   # exactly at the target counts
    (2.15, 6.0),  # reached late (and lost again: the first eval counts)
    (2.0, None),  # never
])
def test_time_to_a_response_nll_counts_the_first_eval_at_or_below_it(target, expected):
    got = F.time_to_accuracy(NLL_CURVE, target, 1.0, F.RESPONSE_NLL)
    assert got == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize("finals,expected", [([2.1], 2.1), ([2.0, 2.2], 2.1 + statistics.stdev([2.0, 2.2]))])
def test_a_response_nll_target_is_bp_mean_plus_one_seed_sd(finals, expected):
    assert F.bp_target(finals, F.RESPONSE_NLL) == pytest.approx(expected)


def _entry(runs, *, locking, step_s, activation, trainable, **extra):
    return {"runs": runs, "locking": locking, "step_s": step_s, "activation_bytes": activation,
            "trainable_params": trainable, **extra}


BP_RUNS = [_run(0, [0.5, 0.7, 0.8, 0.82]), _run(1, [0.5, 0.7, 0.8, 0.78])]  # finals 0.82, 0.78: target 0.80 - sd


def hand_made_report():
    bp = dict(locking=True, trainable=1000)
    arms = {
        "bp": _entry(BP_RUNS, step_s={"simulated": 1.0}, activation=[10, 8, 6], **bp),
        "1f1b": _entry(BP_RUNS, step_s={"simulated": 2.0}, activation=[100, 80, 60], **bp),
        "zb-h1": _entry(BP_RUNS, step_s={"simulated": 1.5}, activation=[100, 80, 60], **bp),
        "zerolock": _entry([_run(0, [0.3, 0.4, 0.5, 0.6]), _run(1, [0.3, 0.4, 0.5, 0.6])], locking=False,
                           step_s={"simulated": 1.0}, activation=[40, 40, 40], trainable=1000),
        "zerolock top-lora:last": _entry([_run(0, [0.3, 0.5, 0.7, 0.9]), _run(1, [0.3, 0.5, 0.7, 0.9])],
                                         locking=False, step_s={"simulated": 1.0}, activation=[50, 30, 20],
                                         trainable=1500),
        "bp matched to zerolock top-lora:last": _entry([_run(0, [0.5, 0.8, 0.9, 0.9])], locking=True,
                                                       step_s={"simulated": 2.2}, activation=[110, 90, 70],
                                                       trainable=1600, matches="zerolock top-lora:last"),
    }
    k2 = {  # K = 2: 1F1B measured, ZeroLock only simulated -> no ratio of mixed sources
        "bp": _entry(BP_RUNS, step_s={"measured": 1.0}, activation=[10, 8], **bp),
        "1f1b": _entry(BP_RUNS, step_s={"measured": 1.0, "simulated": 1.0}, activation=[100, 80], **bp),
        "zerolock": _entry([_run(0, [0.9, 0.9, 0.9, 0.9])], locking=False, step_s={"simulated": 0.5},
                           activation=[50, 50], trainable=1000),
    }
    # a prompt -> response task: nll_mean too, and BP's level is its response NLL (finals 2.08, 2.12: target
    # 2.10 + sd; BP's mean curve 2.5, 2.2, 2.1, 2.1 reaches it at step 6)
    bp_alpaca = [_run(0, [0.4, 0.5, 0.5, 0.5], nll=[2.5, 2.2, 2.1, 2.08]),
                 _run(1, [0.4, 0.5, 0.5, 0.5], nll=[2.5, 2.2, 2.1, 2.12])]
    alpaca = {
        "bp": _entry(bp_alpaca, step_s={"simulated": 1.0}, activation=[10, 8, 6], **bp),
        "1f1b": _entry(bp_alpaca, step_s={"simulated": 2.0}, activation=[100, 80, 60], **bp),
        # its token accuracy never gets to BP's, its NLL does (at step 4): the NLL decides
        "pipedream": _entry([_run(0, [0.1, 0.2, 0.3, 0.4], nll=[2.4, 2.12, 2.0, 1.9])], locking=False,
                            step_s={"simulated": 1.0}, activation=[100, 80, 60], trainable=1000),
        # its token accuracy passes BP's, its NLL climbs: never
        "zerolock": _entry([_run(0, [0.9, 0.9, 0.9, 0.9], nll=[3.0, 4.0, 5.0, 6.0])], locking=False,
                           step_s={"simulated": 1.0}, activation=[40, 40, 40], trainable=1000),
    }
    return {"config": {"steps": 8}, "tasks": {"topics": {"pairs": False}, "alpaca": {"pairs": True}},
            "results": {"topics": {"3": arms, "2": k2}, "alpaca": {"4": alpaca}}}


def test_summary_rows_from_a_hand_made_report():
    rows = F.summary(hand_made_report())
    by = {(r["task"], r["K"], r["arm"]): r for r in rows}
    assert ("topics", 3, "bp") not in by  # BP is the accuracy source, its schedules are the rows
    assert len(rows) == 5 + 2 + 3
    assert by[("alpaca", 4, "pipedream")]["time_to_bp_vs_1f1b"] == pytest.approx(4 * 1.0 / (6 * 2.0))
    assert by[("alpaca", 4, "pipedream")]["nll_mean"] == pytest.approx(1.9)
    assert (by[("alpaca", 4, "zerolock")]["reaches_bp"], by[("alpaca", 4, "zerolock")]["time_to_bp_vs_1f1b"]) == \
        (False, None)
    for r in rows:
        fields = SUMMARY_FIELDS + (["nll_mean"] if r["task"] == "alpaca" else [])
        assert sorted(r) == sorted(fields), r["arm"]
    base = by[("topics", 3, "1f1b")]
    target = F.bp_target([0.82, 0.78])
    assert target == pytest.approx(0.8 - statistics.stdev([0.82, 0.78]))
    # BP's mean curve: 0.5, 0.7, 0.8, 0.8 -> first at >= target at step 6; 1F1B: 6 x 2.0 s
    assert base == {"task": "topics", "K": 3, "arm": "1f1b", "seeds": 2, "steps": 8, "locking": True,
                    "accuracy_mean": pytest.approx(0.8), "accuracy_sd": pytest.approx(statistics.stdev([0.82, 0.78])),
                    "reaches_bp": True, "time_to_bp_vs_1f1b": pytest.approx(1.0), "step_time_vs_1f1b": 1.0,
                    "activation_peak_vs_1f1b": 1.0, "trainable_vs_bp": 1.0}
    assert by[("topics", 3, "zb-h1")]["time_to_bp_vs_1f1b"] == pytest.approx(6 * 1.5 / 12)
    assert by[("topics", 3, "zb-h1")]["step_time_vs_1f1b"] == pytest.approx(1.5 / 2.0)
    never = by[("topics", 3, "zerolock")]
    assert (never["reaches_bp"], never["time_to_bp_vs_1f1b"], never["locking"]) == (False, None, False)
    assert never["step_time_vs_1f1b"] == pytest.approx(1.0 / 2.0)  # its step time, whether it reaches BP or not
    assert never["activation_peak_vs_1f1b"] == pytest.approx(0.4)
    late = by[("topics", 3, "zerolock top-lora:last")]  # 0.7 < target at step 6, 0.9 at step 8: 8 x 1.0 s
    assert late["reaches_bp"] and late["time_to_bp_vs_1f1b"] == pytest.approx(8 / 12)
    assert late["activation_peak_vs_1f1b"] == pytest.approx(0.5) and late["trainable_vs_bp"] == pytest.approx(1.5)
    control = by[("topics", 3, "bp matched to zerolock top-lora:last")]
    assert control["seeds"] == 1 and control["accuracy_sd"] == 0.0 and control["locking"]
    assert control["time_to_bp_vs_1f1b"] == pytest.approx(4 * 2.2 / 12)
    assert control["trainable_vs_bp"] == pytest.approx(1.6)
    # K = 2: a time only simulated is not set against 1F1B's measured one... unless 1F1B has both
    assert by[("topics", 2, "zerolock")]["time_to_bp_vs_1f1b"] == pytest.approx(2 * 0.5 / (6 * 1.0))
    assert by[("topics", 2, "zerolock")]["step_time_vs_1f1b"] == pytest.approx(0.5 / 1.0)
    assert by[("alpaca", 4, "1f1b")]["nll_mean"] == pytest.approx(2.1)


def test_summary_has_no_ratio_across_sources():
    report = hand_made_report()
    del report["results"]["topics"]["2"]["1f1b"]["step_s"]["simulated"]
    row = next(r for r in F.summary(report) if r["K"] == 2 and r["arm"] == "zerolock")
    assert row["reaches_bp"] and row["time_to_bp_vs_1f1b"] is None and row["step_time_vs_1f1b"] is None


@pytest.mark.parametrize("case,arm_step,paired_1f1b_step,expected_ratio", [
    ("probed under a quieter load: twice 1F1B's step on its own probe", 1.0, 0.5, 2.0),
    ("probed under the same load as 1F1B's", 1.0, 2.0, 0.5),
    ("probed under a heavier load: half 1F1B's step on its own probe", 3.0, 6.0, 0.5),
    ("a result without the paired simulation keeps its raw step", 1.0, None, 0.5),
])
def test_a_simulated_step_is_set_against_1f1b_simulated_from_the_same_probe(case, arm_step, paired_1f1b_step,
                                                                          expected_ratio):
    report = hand_made_report()
    batch = 8
    zerolock = report["results"]["topics"]["3"]["zerolock"]
    zerolock["step_s"] = {"simulated": arm_step}
    zerolock["simulated"] = {"samples_per_s": batch / arm_step}
    if paired_1f1b_step is not None:
        zerolock["simulated"]["paired_1f1b_samples_per_s"] = batch / paired_1f1b_step
    row = next(r for r in F.summary(report) if r["K"] == 3 and r["arm"] == "zerolock")
    assert row["step_time_vs_1f1b"] == pytest.approx(expected_ratio), case  # 1F1B's own step: 2.0 s
    assert F.paced_step_s(zerolock, report["results"]["topics"]["3"]["1f1b"])["simulated"] == \
        pytest.approx(expected_ratio * 2.0)


def test_a_2k_way_probe_merges_two_chunks_into_each_stage():
    from benchmarks.common.probe import PROBED, ProbedCosts, merged_adjacent

    fine = ProbedCosts(per_stage={s: {k: float(s + 1) * (i + 1) for i, k in enumerate(PROBED)} for s in range(4)},
                       hidden_bytes=64, layers=[[0, 2], [2, 4], [4, 6], [6, 8]])
    merged = merged_adjacent(fine)
    assert merged.layers == [[0, 4], [4, 8]] and merged.hidden_bytes == 64
    assert merged.per_stage == {0: {k: 3.0 * (i + 1) for i, k in enumerate(PROBED)},
                                1: {k: 7.0 * (i + 1) for i, k in enumerate(PROBED)}}


@pytest.mark.parametrize("text,expected", [
    ("topics", ("topics", "topics")),
    ("trec6=csv:data/trec6.csv", ("trec6", "csv:data/trec6.csv")),
    ("alpaca=jsonl:a.jsonl", ("alpaca", "jsonl:a.jsonl")),
])
def test_task_flag(text, expected):
    assert F.task_arg(text) == expected


def test_a_file_task_records_its_path_and_sha256(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"prompt": "a", "response": "b"}\n')
    info = F.describe_task(f"jsonl:{path}")
    assert info == {"dataset": f"jsonl:{path}", "path": str(path), "file": "rows.jsonl",
                    "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "pairs": True}
    assert F.describe_task("topics") == {"dataset": "topics", "pairs": False}
    with pytest.raises(ValueError, match="no such file"):
        F.describe_task(f"csv:{tmp_path / 'missing.csv'}")


def test_any_readout_is_an_arm_and_the_engine_judges_it(tmp_path):
    arm = F.readout_arm("sample-lora:4")  # whether or not the engine has it yet: the arm list takes the string
    assert arm.trains.readout == "sample-lora:4" and not arm.locking and arm.schedule == "zerolock"
    with pytest.raises(Exception, match="--readout"):  # the engine's refusal, before anything trains
        F.run_frontier(BenchSettings(model="tiny", seq_len=32, steps=4), out=tmp_path, tasks=(("topics", "topics"),),
                       stages=(3,), arms=("1f1b",), readouts=("bogus:1",), seeds=(0,), decisive_seeds=(0,),
                       decisive=(), batch=4, microbatches=2, eval_every=2, eval_size=8, rank=4, jobs=2, time_steps=3)
    assert not (tmp_path / "runs").exists()


def _record(cfg) -> dict:
    return {"run": cfg.out.rsplit("/", 1)[-1], "config": cfg.to_dict(), "analysis": {}, "seed": cfg.train.seed}


@pytest.mark.parametrize("recorded,expected", [
    (dict(seed=0), True),            # the very config: carried
    (dict(seed=1), False),           # another seed under this run's name: trained again
    (dict(seed=0, steps=8), False),  # a shorter or longer horizon is another run
    (dict(seed=0, ckpt_every=30), True),  # how often it checkpointed does not change what it computed
])
def test_a_carried_run_stands_only_for_the_config_it_trained(tmp_path, recorded, expected):
    from zerolock_core.config.run_config import RunConfig, TrainConfig

    def cfg(seed: int, steps: int = 4, ckpt_every: int = 0) -> RunConfig:
        return RunConfig(train=TrainConfig(runtime="reference", seed=seed, steps=steps, ckpt_every=ckpt_every),
                         out=str(tmp_path / "runs" / "topics-K2-zerolock-seed0"))

    carried = {"topics-K2-zerolock-seed0": _record(cfg(**recorded))}
    assert (F.carried_for(cfg(0), carried) is not None) == expected


@pytest.mark.parametrize("recorded_model,recorded_sha,expected", [
    ("smollm2-135m", "same", True),   # another machine's cache folder and data path: the same run
    ("smollm2-135m", "other", False),  # a file of that name with other bytes: trained again
    ("tinyllama-shape", "same", False),  # another model under that folder name: trained again
])
def test_a_run_carried_from_another_machine_stands_for_the_same_model_and_bytes(tmp_path, recorded_model,
                                                                                recorded_sha, expected):
    from zerolock_core.config.run_config import DataConfig, ModelConfig, RunConfig, TrainConfig

    def cfg(model: str, dataset: str) -> RunConfig:
        return RunConfig(train=TrainConfig(runtime="reference", seed=0, steps=4), model=ModelConfig(model=model),
                         data=DataConfig(dataset=dataset), out=str(tmp_path / "runs" / "q-K4-bp-seed0"))

    there = cfg("/home/someone/.cache/zerolock/models/smollm2-135m", "csv:/data/q.csv")
    result = tmp_path / "result.json"
    write_json_atomic(result, {
        "bench": "frontier", "settings": {"model": recorded_model},
        "tasks": {"q": {"dataset": "csv:/data/q.csv", "sha256": "abc" if recorded_sha == "same" else "def"}},
        "results": {"q": {"4": {"bp": {"runs": [_record(there)]}}}}})
    carried = F.carried_runs([result], model="smollm2-135m", model_path="/root/models/smollm2-135m",
                             tasks={"q": {"dataset": "csv:../shared/q.csv", "sha256": "abc"}})
    here = cfg("/root/models/smollm2-135m", "csv:../shared/q.csv")
    assert (F.carried_for(here, carried) is not None) == expected
    # without this invocation's model and tasks (an older caller), the record stands only for its own config
    assert F.carried_for(here, F.carried_runs([result])) is None


def test_carry_refuses_a_result_of_another_benchmark(tmp_path):
    other = tmp_path / "depth.json"
    write_json_atomic(other, {"bench": "depth", "results": {}})
    with pytest.raises(ValueError, match="not a frontier result"):
        F.carried_runs([other])


def test_more_than_two_runs_side_by_side_is_refused(tmp_path):
    with pytest.raises(ValueError, match="--jobs"):
        F.run_frontier(BenchSettings(model="tiny"), out=tmp_path, tasks=(("topics", "topics"),), stages=(3,),
                       arms=(), readouts=(), seeds=(0,), decisive_seeds=(0,), decisive=(), batch=4, microbatches=2,
                       eval_every=2, eval_size=8, rank=4, jobs=3, time_steps=3)


def test_frontier_is_registered_and_takes_its_flags():
    from benchmarks import BENCHMARKS, benchmark_parser

    assert "frontier" in BENCHMARKS
    a = benchmark_parser("frontier").parse_args(
        ["--task", "topics", "--task", "trec6=csv:x.csv", "--stages", "3,4", "--readouts", "sample-lora:4"])
    kw = F._arguments(a, out=None)
    assert kw["tasks"] == (("topics", "topics"), ("trec6", "csv:x.csv")) and kw["readouts"] == ("sample-lora:4",)
    assert kw["stages"] == (3, 4) and kw["eval_every"] == a.steps // 8
    assert kw["carry"] == () and kw["skip_bad_rows"] is False
    b = benchmark_parser("frontier").parse_args(["--skip-bad-rows", "--carry", "a.json", "--carry", "b.json"])
    kw = F._arguments(b, out=None)
    assert kw["skip_bad_rows"] is True and [str(p) for p in kw["carry"]] == ["a.json", "b.json"]


def test_the_arms_settings_give_the_probe_the_rows_the_runs_train_on():
    cfg = F.ArmSettings(model="tiny", skip_bad_rows=True).pipeline(method="zerolock", stages=2, batch=4,
                                                                   microbatches=2, out=Path("unused"))
    assert cfg.data.skip_bad_rows is True


@pytest.mark.slow
def test_a_tiny_frontier_end_to_end_and_its_rerun_runs_nothing(tmp_path):
    settings = BenchSettings(model="tiny", seq_len=32, steps=4)
    kw = dict(out=tmp_path, tasks=(("topics", "topics"),), stages=(2, 3), arms=("1f1b", "zerolock"), readouts=(),
              seeds=(0,), decisive_seeds=(0,), decisive=(), batch=4, microbatches=2, eval_every=2, eval_size=8,
              rank=4, jobs=2, time_steps=3)
    report = F.run_frontier(settings, **kw)
    # BP and ZeroLock trained at each K; 1F1B and ZeroLock timed at K = 2; one probe per K (same chunks)
    assert report["launched"] == {"train": 4, "timing": 2, "probe": 2}
    rows = report["summary"]
    assert {(r["K"], r["arm"]) for r in rows} == {(k, a) for k in (2, 3) for a in ("1f1b", "zerolock")}
    for r in rows:
        assert sorted(r) == sorted(SUMMARY_FIELDS)
        assert r["steps"] == 4 and r["seeds"] == 1 and r["locking"] == (r["arm"] == "1f1b")
        assert r["trainable_vs_bp"] == 1.0 and r["activation_peak_vs_1f1b"] > 0
    for k, source in (("2", "measured"), ("3", "simulated")):
        for e in report["results"]["topics"][k].values():
            assert e["time_source"] == source and [x["step"] for x in e["runs"]] == [[2, 4]]
    zerolock = report["results"]["topics"]["3"]["zerolock"]
    assert zerolock["activation_bytes"] < report["results"]["topics"]["3"]["1f1b"]["activation_bytes"]
    assert math.isfinite(zerolock["step_s"]["simulated"])
    figures = F.figures(report)
    assert set(figures) == {f"{kind}-topics-K{k}" for kind in ("frontier", "curves") for k in (2, 3)}
    labels = sorted(a.text for a in figures["frontier-topics-K3"].layout.annotations if a.text != "never reached")
    assert labels == sorted(r["arm"] for r in rows if r["K"] == 3)  # every arm named once, in the figure
    again = F.run_frontier(settings, **kw)
    assert again["launched"] == {"train": 0, "timing": 0, "probe": 0}
    assert again["summary"] == rows and again["missing"] == []
    # a study cut short: an arm nobody ran is left out and named, nothing is trained
    cut = F.run_frontier(settings, **{**kw, "arms": ("1f1b", "zerolock", "terminal"), "finished_only": True})
    assert cut["launched"]["train"] == 0
    assert cut["missing"] == ["topics-K2-terminal-seed0", "topics-K3-terminal-seed0"]
    assert cut["summary"] == rows
    # a fresh checkout: no run directory, the committed result carried: nothing is trained again, every
    # run is the carried one (times are probed and measured again, accuracies are the runs')
    saved = tmp_path / "result.json"
    write_json_atomic(saved, report)
    fresh = F.run_frontier(settings, **{**kw, "out": tmp_path / "fresh", "carry": (saved,)})
    assert fresh["launched"]["train"] == 0
    assert fresh["carried"] == sorted(f"topics-K{k}-{a}-seed0" for k in (2, 3) for a in ("bp", "zerolock"))
    accuracy = ["task", "K", "arm", "seeds", "steps", "accuracy_mean", "accuracy_sd", "trainable_vs_bp"]
    assert [[r[f] for f in accuracy] for r in fresh["summary"]] == [[r[f] for f in accuracy] for r in rows]


def _goal_report(*, arm_acc, arm_sd=0.0, seeds=3, time=0.7, memory=0.4, trainable=1.0, control=None,
                 schedules=(0.9,)):
    """A summary of one task × K as `goal_rows` reads it: BP's finals 0.80 (two seeds), one arm."""
    rows = [{"task": "t", "K": 4, "arm": "1f1b", "locking": True, "time_to_bp_vs_1f1b": 1.0,
             "accuracy_mean": 0.8, "accuracy_sd": 0.0, "seeds": 2, "activation_peak_vs_1f1b": 1.0,
             "trainable_vs_bp": 1.0}]
    rows += [{**rows[0], "arm": f"schedule{i}", "time_to_bp_vs_1f1b": t} for i, t in enumerate(schedules)]
    rows.append({"task": "t", "K": 4, "arm": "zerolock x", "locking": False, "time_to_bp_vs_1f1b": time,
                 "accuracy_mean": arm_acc, "accuracy_sd": arm_sd, "seeds": seeds, "activation_peak_vs_1f1b": memory,
                 "trainable_vs_bp": trainable})
    if control is not None:
        rows.append({**rows[0], "arm": F.CONTROL_ARM + "zerolock x", "accuracy_mean": control[0],
                     "accuracy_sd": control[1]})
    bp = {"runs": [_run(0, [0.8, 0.8, 0.8, 0.8]), _run(1, [0.8, 0.8, 0.8, 0.8])]}
    return {"summary": rows, "tasks": {"t": {"pairs": False}}, "results": {"t": {"4": {"bp": bp}}}}


@pytest.mark.parametrize("case,kw,expected", [
    ("meets every criterion", {"arm_acc": 0.795}, {c: True for c in F.CRITERIA}),
    ("0.011 behind BP", {"arm_acc": 0.789}, {"accuracy": False}),
    ("two seeds", {"arm_acc": 0.80, "seeds": 2}, {"seeds": False}),
    ("never reaches BP", {"arm_acc": 0.80, "time": None}, {"time": False, "ahead of schedules": False}),
    ("slower than 0.8x", {"arm_acc": 0.80, "time": 0.85, "schedules": (0.95,)}, {"time": False}),
    ("behind a faster schedule", {"arm_acc": 0.80, "time": 0.7, "schedules": (0.65,)},
     {"ahead of schedules": False}),
    ("holds 0.6x the memory", {"arm_acc": 0.80, "memory": 0.6}, {"memory": False}),
    ("more parameters, no control yet", {"arm_acc": 0.80, "trainable": 1.5}, {"control": None}),
    ("its control ahead by more than the spread", {"arm_acc": 0.80, "arm_sd": 0.01, "trainable": 1.5,
                                                   "control": (0.83, 0.02)}, {"control": False}),
    ("its control ahead within the spread", {"arm_acc": 0.80, "arm_sd": 0.01, "trainable": 1.5,
                                             "control": (0.815, 0.02)}, {"control": True}),
])
def test_goal_criteria_on_hand_made_rows(case, kw, expected):
    (row,) = F.goal_rows(_goal_report(**kw))
    want = {c: True for c in F.CRITERIA} | expected
    assert row["met"] == want, case
    assert row["goal"] == all(v is True for v in want.values())
    assert row["accuracy_vs_bp"] == pytest.approx(kw["arm_acc"] - 0.8)


def test_goal_on_a_pairs_task_needs_the_response_nll_within_two_percent():
    report = _goal_report(arm_acc=0.80)
    report["tasks"]["t"]["pairs"] = True  # BP's NLL is 1.0 (_run's default)
    for nll, ok in ((1.019, True), (1.03, False)):
        report["summary"][-1]["nll_mean"] = nll
        assert F.goal_rows(report)[0]["met"]["accuracy"] is ok


def test_the_verdict_names_the_winner_or_the_closest_and_what_it_misses():
    report = _goal_report(arm_acc=0.795)
    report["goal"] = F.goal_rows(report)
    assert F.verdict_lines(report) == [
        "t K=4: zerolock x meets the goal (BP's accuracy, ≤ 0.8× 1F1B's time and ahead of every exact-gradient "
        "schedule, ≤ 0.5× its activation memory)."]
    report = _goal_report(arm_acc=0.80, memory=0.6, trainable=1.5)
    report["goal"] = F.goal_rows(report)
    assert F.verdict_lines(report) == [
        "t K=4: no configuration without update locking meets the goal; the closest, zerolock x (accuracy +0.000 "
        "against BP), misses memory; open: control."]
    report = _goal_report(arm_acc=0.70, memory=0.3)  # the head: lean, far behind
    report["summary"].append({**report["summary"][-1], "arm": "pipedream", "accuracy_mean": 0.79, "memory": 1.0,
                              "activation_peak_vs_1f1b": 1.0, "time_to_bp_vs_1f1b": None})
    report["goal"] = F.goal_rows(report)
    assert F.verdict_lines(report) == [
        "t K=4: no configuration without update locking meets the goal; the closest, zerolock x (accuracy -0.100 "
        "against BP), misses accuracy; the most accurate, pipedream (accuracy -0.010 against BP), misses time, "
        "ahead of schedules, memory."]


def test_the_readme_table_has_a_row_per_arm_but_the_controls_and_the_goal_marks():
    report = hand_made_report()
    report["summary"] = F.summary(report)
    report["settings"] = {"model": "tiny"}
    report["config"] |= {"batch": 4, "microbatches": 2, "simulated_microbatches": "2K"}
    for arms in (a for per_k in report["results"].values() for a in per_k.values()):
        for name, e in arms.items():
            e["accuracy_from"] = "bp" if e["locking"] and "matches" not in e else name
    report["goal"] = F.goal_rows(report)
    report["missing"] = ["topics-K3-terminal-seed0"]
    text = F.format_verdict([report])
    table = [line for line in text.splitlines() if line.startswith("| topics") or line.startswith("| alpaca")]
    assert len(table) == len(report["summary"]) - 1  # the BP control is not a row
    (late,) = [line.split("|")[2:-1] for line in table if "zerolock top-lora:last" in line]
    assert [c.strip() for c in late][:7] == ["zerolock top-lora:last", "no", "0.900 ± 0.000 (2)", "0.67", "0.50",
                                             "0.50", "1.50"]
    assert text.endswith("still to run (1): topics-K3-terminal-seed0")


@pytest.mark.parametrize("case,points,expected", [
    ("apart: each label at its point", [(1.0, 0.2), (2.0, 0.2), (1.0, 0.9)], [0.2, 0.2, 0.9]),
    ("one spot: the upper label moves up by the gap", [(1.0, 1.0), (1.0, 1.01)], [1.0, 1.1]),
    ("a column: stacked from the bottom", [(1.2, 0.48), (1.2, 0.26), (1.2, 0.47), (1.2, 0.32)],
     [0.57, 0.26, 0.47, 0.36]),
    ("near in x, within x_near", [(1.0, 0.5), (1.02, 0.52)], [0.5, 0.6]),
])
def test_labels_of_markers_on_one_spot_stand_a_gap_apart(case, points, expected):
    from benchmarks.common.plots import spread_labels

    assert spread_labels(points, x_near=0.03, gap=0.1) == pytest.approx(expected), case


@pytest.mark.parametrize("case,points,widths,expected", [
    ("a long label reaching over its left neighbour moves up", [(1.0, 0.5), (2.0, 0.52)], [0.0, 1.5], [0.5, 0.6]),
    ("a short one, ending right of it, stays", [(1.0, 0.5), (2.0, 0.52)], [0.0, 0.5], [0.5, 0.52]),
    ("one moved up pushes the one above it on up", [(1.0, 0.5), (1.5, 0.6), (2.0, 0.52)],
     [0.0, 0.0, 1.5], [0.5, 0.7, 0.6]),
])
def test_labels_whose_extents_overlap_stand_a_gap_apart(case, points, widths, expected):
    from benchmarks.common.plots import spread_labels

    assert spread_labels(points, x_near=0.03, gap=0.1, widths=widths) == pytest.approx(expected), case


@pytest.mark.parametrize("anchors", [
    [(0.86, "pipedream"), (0.88, "bp matched to zerolock top-lora:last"), (1.0, "1f1b")],  # Alpaca's, cut off
    [(1.2, "zerolock top-lora:last"), (1.2, "zerolock")],  # only the never column: its longest label
    [(0.5, "x")],
])
def test_the_x_axis_starts_where_every_label_fits_beside_its_marker(anchors):
    from benchmarks.common.plots import PLOT_PX, label_px, left_edge_for_labels

    right = 1.3
    left = left_edge_for_labels(anchors, right)
    room = [(x - left) / (right - left) * PLOT_PX - label_px(text) for x, text in anchors]
    assert min(room) == pytest.approx(0.0, abs=1e-9)  # the widest need sets the edge, with nothing to spare


# (answer rows per eval example, examples asked for, the cap on rows, examples the readout analysis reads)
BOUNDED = [
    ([1] * 64, 64, 256, 64),  # a class label a row: all of them (the classification studies' analyses as before)
    ([30] * 64, 64, 256, 8),  # a prompt -> response task: as many whole examples as fit
    ([300, 1, 1], 3, 256, 1),  # one example past the cap alone: still one
]


@pytest.mark.parametrize("rows, examples, cap, expected", BOUNDED)
def test_the_readout_analysis_reads_at_most_its_cap_of_answer_rows(rows, examples, cap, expected):
    import torch
    from types import SimpleNamespace

    labels = torch.full((len(rows), 400), -100)
    for i, n in enumerate(rows):
        labels[i, :n] = 7
    assert depth._bounded_examples(SimpleNamespace(labels=labels), examples, cap) == expected


@pytest.mark.parametrize("held_by", ["another study invocation", "a zerolock train of its own"])
def test_a_run_another_process_trains_is_left_to_it_untouched(tmp_path, held_by):
    from benchmarks import depth
    from zerolock_core.config.run_config import RunConfig, TrainConfig
    from zerolock_core.rundir.run_dir import RunDir, RunLock

    cfg = RunConfig(train=TrainConfig(runtime="reference", seed=0, steps=4), out=str(tmp_path / "runs" / "r"))
    (tmp_path / "runs").mkdir()
    log, toml = depth.beside(cfg.out, ".log"), depth.beside(cfg.out, ".toml")
    log.write_text("the other process's log\n")
    toml.write_text("the other process's config\n")
    lock = RunLock(depth.beside(cfg.out, depth.STUDY_LOCK)) if held_by == "another study invocation" \
        else RunDir(cfg.out).lock()
    with lock:
        assert depth._train(cfg, log) is False
    assert log.read_text() == "the other process's log\n" and toml.read_text() == "the other process's config\n"


@pytest.mark.slow
def test_a_frontier_reports_what_finished_and_names_a_run_another_invocation_holds(tmp_path):
    from benchmarks import depth
    from zerolock_core.rundir.run_dir import RunLock

    settings = BenchSettings(model="tiny", seq_len=32, steps=4)
    kw = dict(out=tmp_path, tasks=(("topics", "topics"),), stages=(3,), arms=("1f1b", "zerolock"), readouts=(),
              seeds=(0,), decisive_seeds=(0,), decisive=(), batch=4, microbatches=2, eval_every=2, eval_size=8,
              rank=4, jobs=1, time_steps=3)
    (tmp_path / "runs").mkdir()
    with RunLock(depth.beside(tmp_path / "runs" / "topics-K3-zerolock-seed0", depth.STUDY_LOCK)):
        held = F.run_frontier(settings, **kw)
    assert held["launched"]["train"] == 1 and held["missing"] == ["topics-K3-zerolock-seed0"]
    assert [r["arm"] for r in held["summary"]] == ["1f1b"]
    assert not (tmp_path / "runs" / "topics-K3-zerolock-seed0").exists()
    after = F.run_frontier(settings, **kw)  # the other invocation is gone: this one trains the run
    assert after["launched"]["train"] == 1 and after["missing"] == []
    assert [r["arm"] for r in after["summary"]] == ["1f1b", "zerolock"]


@pytest.mark.slow
def test_a_run_finished_after_it_was_planned_is_never_trained_again(tmp_path):
    """Two invocations planned the same run; one finished it. The other, reaching it, must not start it
    over (its `--overwrite` start would wipe the finished run)."""
    from benchmarks import depth
    from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
    from zerolock_core.rundir.run_dir import RunDir

    cfg = RunConfig(train=TrainConfig(runtime="reference", seed=0, steps=2, eval_every=0),
                    data=DataConfig(eval_size=8), out=str(tmp_path / "runs" / "r"))
    (tmp_path / "runs").mkdir()
    log = depth.beside(cfg.out, ".log")
    assert depth._train(cfg, log) is True
    metrics, logged = (RunDir(cfg.out).metrics.read_bytes(), log.read_text())
    assert depth._train(cfg, log) is False
    assert RunDir(cfg.out).metrics.read_bytes() == metrics and log.read_text() == logged


@pytest.mark.slow
def test_a_frozen_prefix_pipedream_arm_trains_at_most_bp_parameters_on_the_memory_halving_layout(tmp_path):
    """`pipedream frozen:1` at K = 3 on the tiny model (8 layers): the memory-halving layout 5 / 1 / 2 with
    LoRA rank 10 on the 3 trained layers (30 rank-layers against BP's 8 × 4), trained as a pipeline;
    simulated without the frozen stage's backward, against 1F1B simulated from an even split probed
    beside it."""
    settings = BenchSettings(model="tiny", seq_len=32, steps=2)
    report = F.run_frontier(settings, out=tmp_path, tasks=(("topics", "topics"),), stages=(3,),
                            arms=("1f1b", "pipedream frozen:1"), readouts=(), seeds=(0,), decisive_seeds=(0,),
                            decisive=(), batch=4, microbatches=2, eval_every=2, eval_size=8, rank=4, jobs=2,
                            time_steps=3)
    # BP and the arm trained; probes: the even split at rank 4, the arm's split and the even one at rank 10
    assert report["launched"] == {"train": 2, "timing": 0, "probe": 3}
    arm = report["results"]["topics"]["3"]["pipedream frozen:1"]
    run = arm["runs"][0]["config"]
    assert list(run["model"]["boundaries"]) == [5, 6] and run["model"]["lora_rank"] == 10
    assert run["train"]["frozen_stages"] == 1 and run["train"]["runtime"] == "pipeline"
    assert arm["simulated"]["peak_inflight"] == [1, 2, 1] and arm["activation_bytes"][0] == 0
    row = next(r for r in report["summary"] if r["arm"] == "pipedream frozen:1")
    assert row["trainable_vs_bp"] == pytest.approx(30 / 32) and not row["locking"]
    assert row["activation_peak_vs_1f1b"] < 1.0


@pytest.mark.parametrize("layers,stages,frozen,layout,rank", [
    (30, 4, 1, (11, 5, 7, 7), 6),  # SmolLM2: stage 1 holds 3 x 5, stage 2 2 x 7, under 1F1B's 4 x 8 / 2
    (30, 4, 2, (8, 8, 7, 7), 8),
    (8, 3, 1, (5, 1, 2), 10),
    (24, 4, 1, (10, 3, 5, 6), 6),  # even 6 a stage, under 4 x 6 / 2 = 12: 3 x 3, 2 x 5, 1 x 6
])
def test_the_memory_halving_layout_keeps_every_trained_stage_under_half_of_1f1b_and_no_slower(
        layers, stages, frozen, layout, rank):
    from benchmarks.common.frozen_layout import matched_rank, memory_halving_layout

    got = memory_halving_layout(layers, stages=stages, frozen=frozen)
    even = -(-layers // stages)
    assert sum(got) == layers and all(n >= 1 for n in got)
    for s in range(frozen, stages):
        assert (stages - s) * got[s] < stages * even / 2  # what it holds at its peak, in layer-micro-batches
        assert got[s] <= (even if s < stages - 1 else layers // stages)
    r = matched_rank(4, layers=layers, trained_layers=sum(got[frozen:]))
    assert r * sum(got[frozen:]) <= 4 * layers < (r + 1) * sum(got[frozen:])
    assert (got, r) == (layout, rank)


@pytest.mark.parametrize("layout,recompute", [
    ((8, 8, 7, 7), (5, 4, 0, 0)),  # SmolLM2 K = 4: 4 x 3 + 1 and 3 x 4 + 1 layer-micro-batches, under 4 x 8 / 2
    ((10, 10, 10), (6, 4, 0)),  # SmolLM2 K = 3: 3 x 4 + 1, 2 x 6 + 1, under 3 x 10 / 2
    ((3, 3, 2), (3, 2, 0)),  # the tiny model at K = 3
    ((4, 4), (3, 2)),
])
def test_the_memory_halving_recompute_keeps_every_stage_under_half_of_1f1b_with_the_fewest_layers(layout,
                                                                                                   recompute):
    from zerolock_core.method.recompute_layout import memory_halving_recompute

    got = memory_halving_recompute(layout)
    K, budget = len(layout), len(layout) * layout[0] / 2

    def held(s: int, r: int) -> int:  # layer-micro-batches at the stage's peak, one recomputed layer included
        return (K - s) * (layout[s] - r) + (1 if r else 0)

    for s, r in enumerate(got):
        assert held(s, r) < budget
        assert r == 0 or held(s, r - 1) >= budget - 1  # one fewer would not keep the margin
    assert got == recompute


def test_a_recompute_arm_without_the_arm_it_takes_its_accuracy_from_is_refused(tmp_path):
    with pytest.raises(ValueError, match="takes its accuracy from 'pipedream'.*add 'pipedream' to --arms"):
        F.run_frontier(BenchSettings(model="tiny", seq_len=32, steps=2), out=tmp_path, tasks=(("topics", "topics"),),
                       stages=(3,), arms=("1f1b", "pipedream recompute"), readouts=(), seeds=(0,),
                       decisive_seeds=(0,), decisive=(), batch=4, microbatches=2, eval_every=2, eval_size=8, rank=4,
                       jobs=1, time_steps=3)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_recompute_arms_share_their_runs_accuracy_and_hold_less_at_the_price_of_their_own_probe(tmp_path):
    """PipeDream and 1F1B with --recompute at K = 3 on the tiny model (3 / 3 / 2 layers, recompute 3 / 2 / 0):
    no run of their own (PipeDream's and BP's accuracy: the same gradients bit for bit), one probe that times
    B with and without the recompute (the plain 1F1B they are set against), their peak under plain 1F1B's."""
    settings = BenchSettings(model="tiny", seq_len=32, steps=2)
    report = F.run_frontier(settings, out=tmp_path, tasks=(("topics", "topics"),), stages=(3,),
                            arms=("1f1b", "pipedream", "pipedream recompute", "1f1b recompute"), readouts=(),
                            seeds=(0,), decisive_seeds=(0,), decisive=(), batch=4, microbatches=2, eval_every=2,
                            eval_size=8, rank=4, jobs=2, time_steps=3)
    assert report["launched"] == {"train": 2, "timing": 0, "probe": 2}  # BP, PipeDream; plain and recompute
    arms = report["results"]["topics"]["3"]
    for name, of in (("pipedream recompute", "pipedream"), ("1f1b recompute", "bp")):
        e = arms[name]
        assert e["recompute"] == [3, 2, 0] and e["accuracy_from"] == of
        assert [r["run"] for r in e["runs"]] == [r["run"] for r in arms[of]["runs"]]
        sim = e["simulated"]
        assert sim["recompute"] == [3, 2, 0] and sim["recompute_bytes"][2] == 0 < min(sim["recompute_bytes"][:2])
        assert e["activation_bytes"] == [b * n + r for b, n, r in zip(sim["kept_bytes"], sim["peak_inflight"],
                                                                      sim["recompute_bytes"])]
    probe = next((tmp_path / "probes").glob("*.json"), None)
    assert probe is not None
    rows = {r["arm"]: r for r in report["summary"]}
    for plain, re in (("pipedream", "pipedream recompute"), ("1f1b", "1f1b recompute")):
        assert rows[re]["accuracy_mean"] == rows[plain]["accuracy_mean"]
        assert rows[re]["activation_peak_vs_1f1b"] < rows[plain]["activation_peak_vs_1f1b"]
        assert rows[re]["trainable_vs_bp"] == rows[plain]["trainable_vs_bp"]
    assert rows["1f1b recompute"]["locking"] and not rows["pipedream recompute"]["locking"]
