"""Compare tab: several runs side by side — a verdict card first (compare_verdict.py), then timelines on one
time axis, memory per stage, throughput and accuracy, and accuracy against seconds. By default the latest
comparison the app ran."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.rundir.runs_root import NotARun

from ..compare_verdict import verdict_markdown
from ..figures.accuracy_time import accuracy_time_figure
from ..figures.compare import Series, compare_memory_figure, compare_summary_figure, compare_timeline_figure
from ..controller import EngineController
from zerolock_core.viz.palette import METHOD_LABELS
from ..lessons import EXAMPLE_PREFIX, SCHEDULES, recorded_runs, recording_name
from ..run_data import RunData, load_run
from ..run_label import run_label
from ..runs_index import list_runs

GUIDE = """Choose several methods on the **Run** tab and press Run: they train one after another on the same
config, and appear here. **Why does ZeroLock need less memory?** Look at the timelines: in GPipe / 1F1B a stage
keeps each micro-batch's activations from its forward (F, blue) until the gradient comes back and its backward
(B, orange) runs; the pink bars are stages waiting for that gradient. ZeroLock's stages compute a local loss
(L, green) right after each forward and free the activations at once: in the memory chart below a ZeroLock
stage holds one micro-batch's activations, a GPipe stage up to all m of a step's (the bars on the right are each
stage's peak; on a long run the curves show the peak of each step, so they look flat). The loss chart puts
every method's **task loss** (the model's output, at the last chunk) on one axis; ZeroLock's earlier chunks
train their own local objectives, drawn beside it, not on it. The charts open on the first three optimizer
steps; the toolbar's *autoscale* shows the whole runs."""


@dataclass(kw_only=True)
class CompareTab:
    runs: gr.Dropdown
    show: gr.Button
    note: gr.Markdown
    timeline: gr.Plot
    memory: gr.Plot
    summary: gr.Plot
    accuracy_time: gr.Plot

    @property
    def outputs(self) -> list[gr.components.Component]:
        return [self.note, self.timeline, self.memory, self.summary, self.accuracy_time]


def build_compare_tab() -> CompareTab:
    gr.Markdown(GUIDE)
    with gr.Row():
        runs = gr.Dropdown(choices=[], multiselect=True, label="runs to compare (newest first)", scale=5,
                           allow_custom_value=True,  # API clients name runs directly
                           elem_id="compare-runs")
        show = gr.Button("Compare", scale=1, elem_id="compare-button")
    note = gr.Markdown(elem_id="compare-verdict")  # the verdict card (compare_verdict.py), above the charts
    timeline = gr.Plot(show_label=False, elem_id="compare-timeline")
    memory = gr.Plot(show_label=False, elem_id="compare-memory")
    summary = gr.Plot(show_label=False, elem_id="compare-summary")
    accuracy_time = gr.Plot(show_label=False, elem_id="compare-accuracy-time")
    return CompareTab(runs=runs, show=show, note=note, timeline=timeline, memory=memory, summary=summary,
                      accuracy_time=accuracy_time)


# what Compare opens on before any run of the user's: the three schedules' recorded example (the first lesson)
DEFAULT_EXAMPLES = tuple(f"{EXAMPLE_PREFIX}{recording_name(SCHEDULES, m)}" for m in SCHEDULES.methods)


def labelled_run_choices(controller: EngineController) -> tuple[list[tuple[str, str]], list[str]]:
    """All runs under the runs root, then the recorded examples shipped with the app, each shown by its label
    and id (run_label.py; the value picked is the id); the default selection: the latest batch's runs, else
    the newest run, else the schedules' example."""
    runs = [r.choice for r in list_runs(controller.root)]
    names = [name for _, name in runs]
    examples = recorded_runs()
    recorded = [load_run(RunDir(path), name=n, with_events=False).choice for n, path in examples.items()]
    batch = [t.name for t in controller.batch() if t.name in names]
    default = batch or names[:1] or [n for n in DEFAULT_EXAMPLES if n in examples]
    return runs + recorded, default


def run_choices(controller: EngineController) -> tuple[list[str], list[str]]:
    """The ids of `labelled_run_choices`, and its default selection."""
    choices, default = labelled_run_choices(controller)
    return [name for _, name in choices], default


def _load(controller: EngineController, name: str) -> RunData:
    """A run of the runs root by its id, or a recording by its listed name (looked up, never built)."""
    examples = recorded_runs()
    if name in examples:
        return load_run(RunDir(examples[name]), name=name)
    return load_run(controller.root.resolve(name), name=name)


def compare_series(data: list[RunData]) -> list[Series]:
    """The runs as Compare draws them, ZeroLock first and the BP reference last, each labelled by its method,
    readout (when not the head), K, dataset and seed (run_label.py), and by its id where two labels would be
    the same."""
    order = list(METHOD_LABELS)  # ZeroLock first, the BP reference last
    data = sorted(data, key=lambda d: (order.index(d.method) if d.method in order else len(order), d.name))
    series = [Series(label="", events=d.events, stages=d.stages, method=d.method, metrics=d.metrics, config=d.config)
              for d in data]
    labels = [run_label(s.run_config, method=s.method, stages=s.stages) for s in series]
    for s, d, label in zip(series, data, labels):
        s.label = label if labels.count(label) == 1 else f"{label} · {d.name}"
    return series


def compare(controller: EngineController, names: list[str] | None) -> tuple:
    if not names:
        return ("Nothing selected.", gr.skip(), gr.skip(), gr.skip(), gr.skip())
    try:
        data = [_load(controller, n) for n in names]
    except (NotARun, FileNotFoundError) as err:
        return (f"⚠️ {err}", gr.skip(), gr.skip(), gr.skip(), gr.skip())
    series = compare_series(data)
    return (verdict_markdown(series), compare_timeline_figure(series, title="Timelines on one time axis"),
            compare_memory_figure(series, title="Activation memory per stage (measured)"),
            compare_summary_figure(series, title="Throughput, accuracy, idle time"),
            accuracy_time_figure(series, title="Accuracy against seconds into training"))
