"""Compare's verdict card, its labels, the simulator panel's cost line and the accuracy-against-seconds
figure, on the shipped recordings and on hand-made records (no browser, no engine run)."""
from __future__ import annotations

import os

import plotly.graph_objects as go
import pytest

from app.compare_verdict import groups_of, reference_group, verdict_markdown
from app.controller import EngineController
from app.figures.accuracy_time import FROM_MEAN_STEP, FROM_TIMELINE, accuracy_time_figure, accuracy_times
from app.figures.compare import Series, predicted_title
from app.run_label import run_label
from app.lessons import recorded_runs
from app.run_data import load_run
from app.tabs.compare import compare, compare_series
from zerolock_core.rundir.metrics import Metrics
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.viz.palette import METHOD_COLOURS

MIB = 2**20
MS = 1_000_000  # ns
RECORDED = ("example: zerolock-k3-m4-4steps", "example: 1f1b-k3-m4-4steps")


def run(method: str, *, readout: str = "head", seed: int = 0, steps: int = 30, dataset: str = "topics",
        stages: int = 3, samples_per_s: float | None = 10.0, accuracy: float | None = 0.5,
        peaks_mib: tuple[float, ...] = (), layers: tuple[tuple[int, int], ...] = ((0, 3), (3, 6), (6, 8)),
        runtime: str = "pipeline", events: list | None = None) -> Series:
    """A compared run, its record written by hand (numbers as the dashboard shows them)."""
    cfg = {"model": {"readout": readout}, "data": {"dataset": dataset},
           "train": {"runtime": runtime, "method": method, "stages": stages, "batch": 8, "microbatches": 4,
                     "steps": steps, "seed": seed}}
    peaks = peaks_mib or (1.0,) * stages
    metrics = Metrics(config=cfg, state="finished", steps_done=steps, throughput_samples_per_s=samples_per_s or 0.0,
                      eval=None if accuracy is None else {"label_accuracy": accuracy},
                      per_stage=[{"peak_activation_bytes": int(p * MIB)} for p in peaks],
                      layers=[list(b) for b in layers] if len(layers) == stages else [])
    s = Series(label="", events=events or [], stages=stages, method=method, metrics=metrics, config=cfg)
    s.label = run_label(s.run_config, method=s.method, stages=s.stages)
    return s


# the runs of issue 43 (K = 3 on the tiny model's 8 layers: 3 / 3 / 2), numbers as its dashboard showed them
TOP = dict(readout="top-lora:last", samples_per_s=14.1, accuracy=0.285, peaks_mib=(4.94, 4.99, 2.0))
ONE_F_ONE_B = dict(samples_per_s=33.6, accuracy=0.250, peaks_mib=(8.78, 5.98, 2.0))


@pytest.mark.parametrize("method, readout, label", [
    ("zerolock", "head", "ZeroLock · K=3 · topics · seed 0"),
    ("zerolock", "top-lora:last", "ZeroLock · top-lora:last · K=3 · topics · seed 0"),
    ("zerolock", "sample-lora:2", "ZeroLock · sample-lora:2 · K=3 · topics · seed 0"),
    ("1f1b", "top-lora:last", "1F1B · K=3 · topics · seed 0"),  # BP's chunks before the last read no readout
    ("1f1b", "affine", "1F1B · affine · K=3 · topics · seed 0"),  # its last chunk does read through it
    ("zerolock", "nonsense", "ZeroLock · nonsense · K=3 · topics · seed 0"),  # an unknown spec is shown as written
])
def test_a_label_carries_the_readout_only_where_a_chunk_reads_through_it(method, readout, label):
    assert run(method, readout=readout).label == label


def test_the_card_on_two_recorded_runs_names_them_and_gives_the_ratios(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    examples = recorded_runs()
    series = compare_series([load_run(RunDir(examples[n]), name=n) for n in RECORDED])
    assert [s.label for s in series] == ["ZeroLock · K=3 · topics · seed 0", "1F1B · K=3 · topics · seed 0"]
    zl, bp = series
    card = verdict_markdown(series)
    speed, memory = zl.samples_per_s / bp.samples_per_s, bp.peak_activation_bytes / zl.peak_activation_bytes
    assert speed > 1 and memory > 1  # the recordings: ZeroLock faster and leaner than 1F1B
    assert (f"**ZeroLock** is **{speed:.2f}× faster** than 1F1B ({zl.samples_per_s:.1f} vs {bp.samples_per_s:.1f} "
            f"samples/s), holds **{memory:.2f}× less** activation memory") in card
    assert f"accuracy **{zl.accuracy - bp.accuracy:+.3f}**" in card and "1 seed each" in card
    assert "| ZeroLock · K=3 · topics · seed 0 | topics | 4 |" in card
    assert "K = 3 > 2 cores here" in card and "readout runs" not in card  # the head runs no extra layer
    outputs = compare(EngineController(tmp_path), list(RECORDED))
    assert len(outputs) == 5 and outputs[0] == card  # the card first, above the four figures


@pytest.mark.parametrize("cores, says_cores", [(2, True), (3, False), (8, False)])
def test_the_card_says_why_a_top_readout_loses_and_when_k_exceeds_the_cores(monkeypatch, cores, says_cores):
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    card = verdict_markdown([run("zerolock", **TOP), run("1f1b", **ONE_F_ONE_B)])
    assert ("**ZeroLock · top-lora:last** is **2.38× slower** than 1F1B (14.1 vs 33.6 samples/s), holds "
            "**1.76× less** activation memory (busiest stage 4.99 vs 8.78 MiB), accuracy **+0.035** "
            "(0.285 vs 0.250, 1 seed each).") in card
    assert ("readout runs a copy of the model's top 2 layers (the last chunk's) on every stage but the last and "
            "trains LoRA on them: 3+2 / 3+2 / 2 layers per micro-batch against 3 / 3 / 2 for 1F1B — its busiest "
            "stage runs 1.67× the layers") in card
    assert ("K = 3 > 2 cores here" in card) is says_cores


@pytest.mark.parametrize("zerolock, words", [
    (dict(readout="sample-lora:2"), "copies of 2 of the model's later layers (sampled over the rest of its depth)"),
    (dict(readout="top:1"), "a copy of the model's top 1 layers on every stage but the last (frozen)"),
    (dict(readout="affine"), "reads out through a trained affine translator"),
    (dict(steps=60), "Different numbers of steps (60 vs 30)"),
    (dict(dataset="csv:/data/trec6.csv"), "Different datasets (csv:/data/trec6.csv vs topics)"),
    (dict(seed=1), "One seed each, and different seeds (1 vs 0)"),
    (dict(stages=2, layers=((0, 4), (4, 8))), "Different pipeline shapes (K 2 vs 3)"),
    (dict(accuracy=None, samples_per_s=None), "against 1F1B: no throughput yet"),
])
def test_the_why_names_what_differs_in_the_configs(monkeypatch, zerolock, words):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    card = verdict_markdown([run("zerolock", **zerolock), run("1f1b", **ONE_F_ONE_B)])
    assert words in card


def test_seeds_of_one_config_are_one_group_with_their_mean_and_count():
    series = [run("zerolock", seed=0, accuracy=0.8, samples_per_s=20.0),
              run("zerolock", seed=1, accuracy=0.9, samples_per_s=30.0), run("1f1b", accuracy=0.8)]
    assert [len(g.runs) for g in groups_of(series)] == [2, 1]
    card = verdict_markdown(series, cores=16)
    assert "**ZeroLock** is **2.50× faster** than 1F1B (25.0 vs 10.0 samples/s)" in card
    assert "accuracy **+0.050** (0.850 vs 0.800, mean of 2 vs 1 seeds)" in card
    assert "One seed each" not in card


@pytest.mark.parametrize("methods, reference", [
    (("zerolock", "gpipe", "1f1b", "zb-h1"), "1f1b"),  # 1F1B whenever it is there, fast or not
    (("zerolock", "gpipe", "zb-h1"), "zb-h1"),  # else the fastest exact-gradient schedule
    (("zerolock", "bp"), "bp"),
    (("zerolock", "pipedream"), None),  # stale weights: not an exact gradient
])
def test_the_reference_is_1f1b_else_the_fastest_exact_gradient_run(methods, reference):
    speed = {"zerolock": 50.0, "gpipe": 10.0, "1f1b": 20.0, "zb-h1": 30.0, "bp": 5.0, "pipedream": 40.0}
    series = [run(m, samples_per_s=speed[m]) for m in methods]
    ref = reference_group(groups_of(series))
    assert (ref.first.method if ref else None) == reference
    if reference is None:
        assert "No exact-gradient run" in verdict_markdown(series, cores=16)


def ev(stage: int, kind: str, mb: int | None, t0_ms: float, t1_ms: float, step: int = 0) -> dict:
    return {"stage": stage, "kind": kind, "mb": mb, "t0": int(t0_ms * MS), "t1": int(t1_ms * MS), "act_bytes": 0,
            "inflight": 1, "sent": 0, "recv": 0, "step": step, "gen": 0}


# ZeroLock on 2 stages, one micro-batch per step, two steps (ms): stage 0's L runs its readout's layers
TWO_STEPS = [e for step in (0, 1) for e in (
    ev(0, "F", step, 100 * step, 100 * step + 10), ev(0, "L", step, 100 * step + 10, 100 * step + 40),
    ev(1, "F", step, 100 * step + 10, 100 * step + 20), ev(1, "L", step, 100 * step + 20, 100 * step + 30),
    ev(0, "STEP", None, 100 * step + 40, 100 * step + 42, step=step + 1),
    ev(1, "STEP", None, 100 * step + 30, 100 * step + 32, step=step + 1))]


def test_the_simulator_panel_says_what_a_step_costs_readout_layers_included():
    s = run("zerolock", readout="top-lora:last", stages=2, steps=2, layers=((0, 4), (4, 8)), events=TWO_STEPS)
    s.run_config["train"]["microbatches"] = 1
    from app.figures.compare import predicted_events

    title = predicted_title(s, predicted_events(s, windows=2))
    assert title.startswith("ZeroLock · top-lora:last: predicted by the simulator (the run's mean action times): "
                            "2 steps in ")
    assert title.endswith("<br>F+L per micro-batch 40 / 20 ms on 4+4 / 4 layers (the chunk's + its readout's)")


HISTORY = [{"step": 2, "label_accuracy": 0.4}, {"step": 4, "label_accuracy": 0.6}]


@pytest.mark.parametrize("record, events, steps, seconds, source", [
    # the reference runtime: its evals timed by its mean step time (8 s / 4 steps)
    (dict(eval_history=HISTORY, eval={"label_accuracy": 0.6}, steps_done=4, wall_s=8.0), [],
     (2, 4), (4.0, 8.0), FROM_MEAN_STEP),
    # a resumed session trained steps 3..4 in 4 s: 2 s per step
    (dict(eval={"label_accuracy": 0.6}, steps_done=4, wall_s=4.0, resumed_from_step=2), [], (4,), (8.0,),
     FROM_MEAN_STEP),
    # a pipeline run: its one final eval, at the moment its timeline's last stage finished step 2
    (dict(eval={"label_accuracy": 0.7}, steps_done=2, wall_s=9.0), TWO_STEPS, (2,), (0.142,), FROM_TIMELINE),
])
def test_accuracy_times_come_from_the_timeline_else_from_the_mean_step(record, events, steps, seconds, source):
    s = Series(label="x", events=events, stages=2, method="zerolock",
               metrics=Metrics(config={}, state="finished", **record))
    at = accuracy_times(s)
    assert at.steps == steps and at.seconds == pytest.approx(seconds) and at.source == source


def test_the_accuracy_figure_draws_one_line_per_run_in_its_method_colour_on_0_to_1():
    zl = run("zerolock", readout="top-lora:last", steps=4)
    zl.metrics.eval_history, zl.metrics.wall_s = HISTORY, 8.0
    bp = run("1f1b", steps=4, accuracy=0.7)
    bp.metrics.wall_s = 2.0
    fig = accuracy_time_figure([zl, bp])
    go.Figure(fig.to_dict())
    assert [(t.name, list(t.x), list(t.y)) for t in fig.data] == [
        (f"ZeroLock · top-lora:last (x: {FROM_MEAN_STEP})", [4.0, 8.0], [0.4, 0.6]),
        (f"1F1B (x: {FROM_MEAN_STEP})", [2.0], [0.7])]
    assert [t.line.color for t in fig.data] == [METHOD_COLOURS["zerolock"], METHOD_COLOURS["1f1b"]]
    assert list(fig.layout.yaxis.range) == [0, 1]
    notes = [a.text for a in fig.layout.annotations]
    assert "chance 1/4" in notes and any(n.startswith("One point: a run evaluated only at its end") for n in notes)
