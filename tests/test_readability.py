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
