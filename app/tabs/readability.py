"""Readability tab: can the frozen head read the hidden state after every layer (logit lens, and a
fitted translator per layer)? Of the pretrained model, or of one of the runs folder's finished runs beside
it (its own model, dataset and K). Computed on demand in the dashboard's process, with a progress bar;
the figure is the one `zerolock bench readability` writes, its accuracy axis always 0-1, and a cut is
suggested only where the accuracies differ by more than their sampling error."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from zerolock_core.data.registry import ACCEPTED_SPECS
from zerolock_core.config.field_words import FORM
from zerolock_core.models.presets import PRESETS
from zerolock_core.rundir.runs_root import RunsRoot

from ..runs_index import list_runs

SEQ_LEN = 64  # the examples' length: short, so a measurement takes seconds
# what the tab shows before anything is measured: the committed study of the tiny model, pretrained and after
# a 200-step fine-tune (the pretrained tiny model alone is unreadable at every layer: nothing to see)
RECORDED = Path(__file__).resolve().parents[2] / "docs" / "results" / "readability-tiny.json"
# by name only: a request never names a path (a model directory, a CSV) on the dashboard's machine
MODELS = tuple(PRESETS)
DATASETS = tuple(spec for spec in ACCEPTED_SPECS if ":" not in spec)
PRETRAINED = "pretrained only"  # the run picker's first choice: no run, the model as loaded
MAX_K = 8  # the K slider's end (a picked run of more stages widens it to its own K)


@dataclass(kw_only=True)
class ReadabilityTab:
    inputs: list[gr.components.Component]
    button: gr.Button
    outputs: list[gr.components.Component]


def build_readability_tab() -> ReadabilityTab:
    gr.Markdown("Every ZeroLock chunk reads its hidden state out through the **frozen** final norm + LM head. "
                "This measures whether the head can: label accuracy after each layer, read through the "
                "frozen head (solid), through a small translator fitted per layer (dotted), and through the "
                "model's own top layers (dash-dot: the Run form's readout top:last, the last chunk's layers at K, read by "
                "every chunk before it). Dashed lines are the chunk boundaries at K; the grey dotted line is "
                "always answering the most frequent label.")
    with gr.Row():
        model = gr.Dropdown(list(MODELS), value="tiny", label="model", elem_id="read-model")
        dataset = gr.Dropdown(list(DATASETS), value="topics", label="dataset", elem_id="read-dataset")
        stages = gr.Slider(1, MAX_K, value=3, step=1, label="stages K (boundaries drawn)", elem_id="read-k")
        examples = gr.Slider(32, 512, value=128, step=32, label="eval examples", elem_id="read-examples")
        fit = gr.Checkbox(True, label="fit translators (slower)", elem_id="read-fit")
        top = gr.Checkbox(True, label="read through the top layers (top:last)", elem_id="read-top")
    with gr.Row():
        # listed when the tab opens (run_choices): a run trained since then is there on the next visit
        run = gr.Dropdown([PRETRAINED], value=PRETRAINED, scale=3, elem_id="read-run",
                          label="weights: the pretrained model, or a finished run beside it (its own model, "
                                "dataset and K)")
        button = gr.Button("Measure readability", variant="primary", scale=1, elem_id="read-go")
    text = gr.Markdown(elem_id="read-text")
    plot = gr.Plot(show_label=False, elem_id="read-plot")
    # a picked run brings its own model, dataset and K (ui.py wires `picked_run_fields`, which reads the runs
    # folder): its fields show them, greyed out, rather than the form's values it would ignore
    return ReadabilityTab(inputs=[model, dataset, stages, examples, fit, top, run], button=button,
                          outputs=[text, plot])


def picked_run_fields(root: RunsRoot | None, picked: str | None) -> list:
    """The model, dataset and K fields once `picked` is chosen: the form's own, editable, for the pretrained
    model; a finished run's model, dataset and K, greyed out (a value the field cannot show, such as a
    model directory, is left as it is); greyed out as they are for a run that cannot be read (the
    measurement then says why)."""
    if not picked or picked == PRETRAINED or root is None:
        return [gr.update(interactive=True)] * 3
    try:
        _, cfg = run_config(root, str(picked), 1)
    except ValueError:
        return [gr.update(interactive=False)] * 3
    k = cfg.train.stages
    return [gr.update(value=cfg.model.model, interactive=False) if cfg.model.model in MODELS else
            gr.update(interactive=False),
            gr.update(value=cfg.data.dataset, interactive=False) if cfg.data.dataset in DATASETS else
            gr.update(interactive=False),
            gr.update(value=k, maximum=max(k, MAX_K), interactive=False)]


def trained_runs(root: RunsRoot) -> list[tuple[str, str]]:
    """(label, run id) of every run of the runs folder whose final weights were all written: what can be
    read."""
    out = []
    for r in list_runs(root):
        chunks = r.rd.final_chunks() if r.rd.final.is_dir() else {}
        if not r.live and r.stages and all(k in chunks for k in range(r.stages)):
            out.append((f"{r.label} ({r.name})", r.name))
    return out


def run_choices(root: RunsRoot, current: str | None = None) -> gr.Dropdown:
    """The run picker: the pretrained model, then the finished runs; the one chosen stays while it is there."""
    runs = trained_runs(root)
    value = current if current in {run_id for _, run_id in runs} else PRETRAINED
    return gr.Dropdown(choices=[(PRETRAINED, PRETRAINED), *runs], value=value)


def run_config(root: RunsRoot, run: str, eval_size: int):
    """(the run's directory, its config with `eval_size` eval examples); ValueError saying why it cannot be read."""
    from zerolock_core.export.trained_model import check_trained_run

    rd, saved = check_trained_run(root.resolve(run).path)  # an id under the runs folder, never a path
    return rd, dataclasses.replace(saved, data=dataclasses.replace(saved.data, eval_size=eval_size))


def measure(model: str, dataset: str, stages: float, examples: float, fit: bool, top: bool = True,
            run: str | None = PRETRAINED, *, root: RunsRoot | None = None,
            progress: gr.Progress = gr.Progress()) -> tuple:
    """Measure the pretrained model (`run` PRETRAINED) or a finished run of `root` beside it."""
    from zerolock_core.analysis.readability import TranslatorFit, lens_config, measure_condition, readability_summary
    from zerolock_core.analysis.readability_figures import readability_figures

    k, n = int(stages), int(examples)
    model, dataset = str(model or "").strip(), str(dataset or "").strip()
    trained = bool(run) and run != PRETRAINED
    run_dir = None
    try:
        if trained:
            if root is None:
                raise ValueError("this dashboard has no runs folder to read a run from")
            run_dir, cfg = run_config(root, str(run), n)
            model, dataset, k = cfg.model.model, cfg.data.dataset, cfg.train.stages
        elif model not in MODELS or dataset not in DATASETS:  # no path: the dashboard reads only its runs folder
            return (f"⚠️ the dashboard measures its own models ({', '.join(MODELS)}) on its own datasets "
                    f"({', '.join(DATASETS)}); a model directory or a CSV file is measured from the command line "
                    "(`zerolock bench readability`)"), None
        else:
            cfg = lens_config(model=model, dataset=dataset, seq_len=SEQ_LEN, method="bp", stages=k, steps=1,
                              eval_size=n, out=None, boundaries=None)
    except ValueError as err:  # ConfigError, NotARun: in one line
        return f"⚠️ {err}", None
    translator = TranslatorFit(steps=100, examples=128) if fit else None
    progress(0.0, desc="loading the model")

    def bar(label: str):
        return lambda done, total: progress(done / max(1, total), desc=label)

    try:
        conditions = {"pretrained": measure_condition(cfg, run_dir=None, fit=translator, eval_size=n, progress=bar,
                                                      top=bool(top))}
        if run_dir is not None:  # the run beside the model it started from, named by its method (its colour)
            conditions[cfg.train.method] = measure_condition(cfg, run_dir=run_dir.path, fit=translator, eval_size=n,
                                                             progress=bar, top=bool(top))
    except (ValueError, FileNotFoundError) as err:  # ConfigError: a bad model / dataset name, a missing extra
        return f"⚠️ {err}", None
    summary = readability_summary(conditions, stages=k, boundaries=cfg.model.boundaries)
    scored = conditions["pretrained"]["lens"][-1]["examples"]
    seconds = sum(c["seconds"] for c in conditions.values())
    whose = f"run `{run}` ({cfg.train.method}, K = {k}) beside the pretrained model" if trained else "pretrained"
    lines = [f"**{model}** on **{dataset}**, {whose}, {scored} eval examples, {seconds:.0f} s. "
             f"Majority class: {summary['chance']:.2f}; last layer (frozen head): "
             + ", ".join(f"{name} {c['lens'][-1]['label_accuracy']:.2f}" for name, c in conditions.items()) + "."]
    for name, condition in conditions.items():
        if "top" in condition:
            n_top, reach = condition["top_layers"], condition["top"]
            lines.append(f"- {name} through the top {n_top} layers ({FORM.value('readout', 'top:last')}): "
                         + ", ".join(f"after layer {r['layer']}: {r['label_accuracy']:.2f}"
                                     for r in reach if r["layer"] in summary["chunk_boundaries"])
                         + " (the chunks before the last, at their ends)")
    for name, per_curve in summary["suggestions"].items():
        for curve, s in per_curve.items():
            where = "no cut" if s["boundaries"] is None else \
                FORM.value("boundaries", ",".join(str(b) for b in s["boundaries"])) if s["boundaries"] else "—"
            lines.append(f"- cut suggestion ({name}, {'frozen head' if curve == 'lens' else 'translator'}): "
                         f"{where} — {s['why']}")
    figure = readability_figures(summary, model=model, dataset=dataset, stages=k)["readability_label_accuracy"]
    return "\n".join(lines), figure


def recorded(current: object = None, path: Path = RECORDED) -> tuple:
    """The committed readability study (`RECORDED`), shown when the tab opens and nothing was measured
    yet; a measurement already on screen stays."""
    from zerolock_core.analysis.readability_figures import readability_figures

    if current:
        return gr.skip(), gr.skip()
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        return "Press **Measure readability** (about a minute on 2 cores).", None
    model, dataset = report["settings"]["model"], report["settings"]["dataset"]
    last = {name: c["lens"][-1]["label_accuracy"] for name, c in report["conditions"].items()}
    text = (f"**Recorded** by the project's readability study ({RECORDED.name}, {report['machine']}): "
            f"{model} on {dataset}, pretrained and "
            f"after {report['finetune_steps']} steps of fine-tuning. Through the frozen head at the last layer: "
            + ", ".join(f"{name} {acc:.2f}" for name, acc in last.items())
            + f" (majority class {report['chance']:.2f}). Press **Measure readability** for a live measurement.")
    figure = readability_figures(report, model=model, dataset=dataset, stages=report["stages"])
    return text, figure["readability_label_accuracy"]
