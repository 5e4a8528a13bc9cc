"""The logit lens scores every layer exactly as the evaluator scores a chunk; translators start as
the plain lens; cut suggestions follow from the readable layers."""
import json
import pytest
import torch

from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
from zerolock_core.train.evaluation import evaluate_chunks
from zerolock_core.viz.palette import METHOD_COLOURS, NEUTRAL
from zerolock_core.analysis.readability import (TranslatorFit, fit_translators, lens_scores, measured_curves,
                                       readability_summary, suggest_boundaries)
from zerolock_core.analysis.readability_figures import readability_figures
from zerolock_core.train.run_setup import build_run_setup


@pytest.fixture(scope="module")
def tiny_setup():
    return build_run_setup(RunConfig(data=DataConfig(seq_len=48, eval_size=24), train=TrainConfig(stages=3)))


def test_lens_at_every_chunk_end_equals_the_evaluators_chunk_readout(tiny_setup):
    b = tiny_setup
    lens = lens_scores(b.chunks, b.eval, b.label_first_tokens, limit=24)
    reference = evaluate_chunks(b.chunks, b.eval, b.label_first_tokens, limit=24)
    assert len(lens) == 8
    for chunk, ref in zip(b.chunks, reference):
        got = lens[chunk.layer_range[1] - 1]
        assert got["label_accuracy"] == ref["label_accuracy"] and got["accuracy"] == ref["accuracy"]
        assert got["nll"] == pytest.approx(ref["nll"], rel=1e-6)


def test_zero_step_translators_read_like_the_frozen_head(tiny_setup):
    b = tiny_setup
    answers = torch.unique(b.train.labels[b.train.labels != -100])
    translators = fit_translators(b.chunks, b.train, answers, TranslatorFit(steps=0, examples=8))
    plain = lens_scores(b.chunks, b.eval, b.label_first_tokens, limit=24)
    tuned = lens_scores(b.chunks, b.eval, b.label_first_tokens, limit=24, translators=translators)
    assert plain == tuned


def test_fitting_translators_lowers_the_training_rows_loss(tiny_setup):
    b = tiny_setup
    answers = torch.unique(b.train.labels[b.train.labels != -100])
    before = lens_scores(b.chunks, b.train, b.label_first_tokens, limit=32)
    translators = fit_translators(b.chunks, b.train, answers, TranslatorFit(steps=40, examples=32, lr=3e-3))
    after = lens_scores(b.chunks, b.train, b.label_first_tokens, limit=32, translators=translators)
    assert all(a["nll"] < bf["nll"] for a, bf in zip(after, before))


def test_the_top_lens_at_every_chunk_end_equals_the_engines_top_last_readout_of_that_chunk(tiny_setup):
    """The lens through the model's own top N layers is what a chunk with `--readout top:last` reads (its
    evaluator's numbers), and where it stops (layer L − N) it is the frozen head's reading of layer L."""
    from zerolock_core.config.run_config import ModelConfig
    from zerolock_core.analysis.readability import pretrained_top, top_lens_scores

    b = tiny_setup
    layers = 8
    first, end = b.chunks[-1].layer_range
    top = top_lens_scores(b.chunks, b.eval, b.label_first_tokens,
                          pretrained_top(b.cfg.model.model, layers=layers, top=end - first), limit=24)
    assert [r["layer"] for r in top] == list(range(1, first + 1))
    engine = build_run_setup(RunConfig(model=ModelConfig(readout="top:last"), data=DataConfig(seq_len=48, eval_size=24),
                                       train=TrainConfig(stages=3)))
    reference = evaluate_chunks(engine.chunks, engine.eval, engine.label_first_tokens, limit=24)
    for chunk, ref in zip(engine.chunks[:-1], reference):
        got = top[chunk.layer_range[1] - 1]
        assert got["label_accuracy"] == ref["label_accuracy"] and got["accuracy"] == ref["accuracy"]
        assert got["nll"] == pytest.approx(ref["nll"], rel=1e-5)
    lens = lens_scores(b.chunks, b.eval, b.label_first_tokens, limit=24)
    assert top[-1]["label_accuracy"] == lens[-1]["label_accuracy"]
    assert top[-1]["nll"] == pytest.approx(lens[-1]["nll"], rel=1e-5)


def test_the_readability_table_and_figure_show_the_top_lens_where_it_reaches(tiny_setup):
    from benchmarks.readability import format_report
    from zerolock_core.analysis.readability import measure_condition

    b = tiny_setup
    condition = measure_condition(b.cfg, run_dir=None, fit=None, eval_size=24, top=True)
    assert condition["top_layers"] == 2 and len(condition["top"]) == 6
    summary = {**readability_summary({"pretrained": condition}, stages=3, boundaries=None), "stages": 3}
    table = format_report(summary)
    assert "pretrained top:2 (the model's top 2 layers)" in table
    last, reached = (next(line for line in table.splitlines() if line.startswith(f"| {n} ")) for n in (8, 6))
    assert last.split("|")[-2].strip() == "–" and reached.split("|")[-2].strip() != "–"  # it stops at L − N = 6
    figure = readability_figures(summary, model="tiny", dataset="topics", stages=3)["readability_label_accuracy"]
    assert [t.line.dash for t in figure.data] == ["solid", "dashdot"]
    one = measure_condition(RunConfig(data=DataConfig(seq_len=48, eval_size=24), train=TrainConfig(stages=1)), run_dir=None,
                            fit=None, eval_size=24, top=True)
    assert "top" not in one  # K = 1: no chunk reads through a top


@pytest.mark.parametrize("accuracy,stages,expected", [
    ([0.26] * 8, 3, None),                                   # nothing reads: fine-tune first
    ([0.25, 0.25, 0.3, 0.8, 0.8, 0.8, 0.8, 0.9], 3, [4, 6]),  # readable from layer 4: 3 -> 4, 6 stays
    ([0.9] * 8, 3, [3, 6]),                                  # everything reads: the even split
    ([0.25] * 7 + [0.9], 2, None),                           # only the last layer reads
    ([0.25] * 6 + [0.9, 0.9], 3, None),                      # one readable layer, two cuts needed
    ([0.25] * 6 + [0.9, 0.9], 2, [7]),
    ([0.9] * 8, 1, []),
])
def test_suggested_boundaries(accuracy, stages, expected):
    assert suggest_boundaries(accuracy, stages=stages, chance=0.25)["boundaries"] == expected


def _scores(accuracy: list[float]) -> list[dict[str, float]]:
    return [{"layer": i + 1, "label_accuracy": a, "nll": 1 - a} for i, a in enumerate(accuracy)]


def test_the_summary_and_its_figures_draw_every_curve_in_the_palettes_colours():
    """One condition per colour source: the pretrained model in grey, a fine-tune in its method's colour."""
    conditions = {"pretrained": {"lens": _scores([0.25] * 6 + [0.9, 0.9]), "chance": 0.25},
                  "zerolock": {"lens": _scores([0.9] * 8), "tuned": _scores([0.95] * 8), "chance": 0.25}}
    summary = readability_summary(conditions, stages=3, boundaries=None)
    assert (summary["layers"], summary["chance"], summary["chunk_boundaries"]) == (8, 0.25, [3, 6])
    assert summary["suggestions"]["zerolock"]["tuned"]["boundaries"] == [3, 6]
    assert [(name, curve) for name, curve, _ in measured_curves(summary)] == [
        ("pretrained", "lens"), ("zerolock", "lens"), ("zerolock", "tuned")]
    figs = readability_figures(summary, model="tiny", dataset="topics", stages=3)
    assert set(figs) == {"readability_label_accuracy", "readability_nll"}
    accuracy = figs["readability_label_accuracy"]
    assert [(t.line.color, t.line.dash) for t in accuracy.data] == [
        (NEUTRAL["base"], "solid"), (METHOD_COLOURS["zerolock"], "solid"), (METHOD_COLOURS["zerolock"], "dot")]
    lines = [s.line.color for s in accuracy.layout.shapes]
    assert lines == [NEUTRAL["boundary"], NEUTRAL["boundary"], NEUTRAL["chance"]]


def test_the_readability_tab_opens_on_the_committed_study_and_keeps_a_measurement(tmp_path):
    from app.tabs.readability import RECORDED, recorded

    text, fig = recorded(None)
    report = json.loads(RECORDED.read_text())
    assert text.startswith("**Recorded**") and report["machine"] in text and "--" not in text
    assert {t.name.split(" · ")[0] for t in fig.data} == set(report["conditions"])  # pretrained and fine-tuned
    kept = recorded({"data": []})  # a live measurement on screen is not replaced
    assert all(x == {"__type__": "update"} for x in kept)
    text, fig = recorded(None, path=tmp_path / "missing.json")
    assert fig is None and "Measure readability" in text


# ---- sampling error: one interval, and no cut from a blip within it ---------------------------------------

@pytest.mark.parametrize("rate,n,low,high,text", [
    (0.375, 128, 0.2959, 0.4614, "0.375 ± 0.08"),
    (0.30, 128, 0.2274, 0.3843, "0.30 ± 0.08"),
    (0.0, 10, 0.0, 0.2775, "0.00 ± 0.14"),   # never a point at 0 or 1
    (1.0, 10, 0.7225, 1.0, "1.00 ± 0.14"),
    (0.5, 10_000, 0.4902, 0.5098, "0.50 ± 0.01"),
])
def test_the_wilson_interval_of_an_accuracy(rate, n, low, high, text):
    from zerolock_core.analysis.sampling_error import wilson

    got = wilson(rate, n)
    assert (got.low, got.high) == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))
    assert got.text() == text and 0.0 <= got.low <= rate <= got.high <= 1.0


@pytest.mark.parametrize("rate,n", [(0.5, 0), (1.5, 10), (-0.1, 10)])
def test_an_interval_of_no_examples_or_no_rate_is_refused(rate, n):
    from zerolock_core.analysis.sampling_error import wilson

    with pytest.raises(ValueError, match="accuracy"):
        wilson(rate, n)


@pytest.mark.parametrize("accuracy,examples,expected,words", [
    # the dashboard's blip: 0.375 against a majority class of 0.30 on 128 examples
    ([0.3] * 5 + [0.36, 0.37, 0.375], 128, None,
     "last layer 0.375 ± 0.08 vs majority class 0.30 ± 0.08 on 128 examples: within sampling error, no cut"),
    ([0.3] * 5 + [0.36, 0.37, 0.375], None, [6, 7], "layers 6+"),           # without n: the old rule cuts
    ([0.3] * 5 + [0.36, 0.37, 0.375], 100_000, [6, 7], "beyond its 95 % interval on 100000 examples"),
    ([0.9] * 8, 128, [3, 6], "layer 1: 0.90 ± 0.05 vs majority class 0.30 ± 0.08"),  # clear: the even split
    ([0.3, 0.3, 0.4, 0.9, 0.9, 0.9, 0.9, 0.9], 64, [4, 6], "layers 4+"),    # layer 3's 0.4 is within error
    ([0.05] * 8, 256, None, "below it, no cut suggested"),                   # clearly below chance
])
def test_a_cut_is_suggested_only_beyond_sampling_error(accuracy, examples, expected, words):
    got = suggest_boundaries(accuracy, stages=3, chance=0.30, examples=examples)
    assert got["boundaries"] == expected and words in got["why"], got


def test_the_summary_reads_each_curves_sample_size_from_its_scores():
    lens = [{"layer": i + 1, "label_accuracy": a, "nll": 1.0, "examples": 128}
            for i, a in enumerate([0.3] * 5 + [0.36, 0.37, 0.375])]
    summary = readability_summary({"pretrained": {"lens": lens, "chance": 0.30}}, stages=3, boundaries=None)
    assert summary["suggestions"]["pretrained"]["lens"]["boundaries"] is None
    assert "within sampling error" in summary["suggestions"]["pretrained"]["lens"]["why"]


@pytest.fixture(scope="module")
def runs_of_one_trained(tmp_path_factory):
    """A runs folder holding one tiny ZeroLock run of 5 steps (the reference runtime), and an unfinished one."""
    from zerolock_core.config.run_config import ModelConfig
    from zerolock_core.rundir.runs_root import RunsRoot
    from zerolock_core.train.reference_trainer import train_reference

    root = tmp_path_factory.mktemp("runs")
    cfg = RunConfig(model=ModelConfig(model="tiny"), data=DataConfig(seq_len=32, eval_size=16),
                    train=TrainConfig(runtime="reference", method="zerolock", stages=2, batch=4, microbatches=2,
                                      steps=5, threads=1), out=str(root / "zerolock-k2"))
    assert train_reference(cfg, progress=False, overwrite=True).state == "finished"
    (root / "half-made").mkdir()
    (root / "half-made" / "config.json").write_text(json.dumps(cfg.to_dict()))
    return RunsRoot(root)


def test_readability_measures_a_trained_run_beside_the_pretrained_model_on_a_0_to_1_axis(runs_of_one_trained):
    from app.tabs.readability import PRETRAINED, measure, run_choices, trained_runs

    assert [run_id for _, run_id in trained_runs(runs_of_one_trained)] == ["zerolock-k2"]  # not the half-made one
    assert run_choices(runs_of_one_trained, "gone").value == PRETRAINED
    text, fig = measure("tiny", "topics", 3, 32, False, False, "zerolock-k2", root=runs_of_one_trained,
                        progress=lambda *a, **k: None)
    assert "run `zerolock-k2` (zerolock, K = 2) beside the pretrained model" in text, text
    assert [t.name for t in fig.data] == ["pretrained · frozen head", "zerolock · frozen head"]
    assert all(0.0 <= y <= 1.0 for t in fig.data for y in t.y)
    assert tuple(fig.layout.yaxis.range) == (0, 1) and fig.layout.yaxis.autorange is False
    assert "cut suggestion (zerolock, frozen head)" in text and "on 32 examples" in text


@pytest.mark.parametrize("run,words", [("../etc", "not a run under the runs folder"),
                                       ("half-made", "no trained weights"),
                                       ("nowhere", "nowhere")])
def test_readability_refuses_a_run_it_cannot_read_in_one_line(runs_of_one_trained, run, words):
    from app.tabs.readability import measure

    text, fig = measure("tiny", "topics", 3, 32, False, False, run, root=runs_of_one_trained,
                        progress=lambda *a, **k: None)
    assert text.startswith("⚠️") and words in text and "\n" not in text and fig is None, text


# (the picked run, the fields' updates: (value or None when left as it is, editable))
PICKED = [
    ("pretrained only", [(None, True)] * 3),
    ("zerolock-k2", [("tiny", False), ("topics", False), (2, False)]),  # the run's own, greyed out
    ("half-made", [(None, False)] * 3),  # unreadable: greyed out as it is; measuring says why
    ("../etc", [(None, False)] * 3),
]


@pytest.mark.parametrize("picked, expected", PICKED, ids=[p for p, _ in PICKED])
def test_a_picked_run_shows_its_own_model_dataset_and_k(runs_of_one_trained, picked, expected):
    from app.tabs.readability import picked_run_fields

    updates = picked_run_fields(runs_of_one_trained, picked)
    assert [(u.get("value"), u["interactive"]) for u in updates] == expected
