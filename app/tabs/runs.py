"""Runs tab: every run directory under the runs root, reopen one, export its files, try its fine-tuned model."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from zerolock_core.rundir.runs_root import NotARun

from ..controller import EngineController
from zerolock_core.export.generation import DEFAULT_NEW_TOKENS, Answer, GenerateRequest, generate_answers, tally

from ..exports import ExportError, chrome_trace, events_csv, figure_png, model_zip
from ..figures.memory import memory_figure
from ..run_data import load_run
from ..page.page_script import RUNS_TABLE_ID
from ..runs_index import COLUMNS, runs_table
from ..figures.timeline import timeline_figure

EXPORTS = ("events CSV", "Chrome / Perfetto trace", "PNG: timeline", "PNG: memory", "PEFT adapter (zip)",
           "merged model (zip)")
MODEL_EXPORTS = {"PEFT adapter (zip)": "peft", "merged model (zip)": "merged"}  # -> exports.model_zip's kind
TRY_COLUMNS = ["prompt", "expected", "base model", "fine-tuned"]
TRY_WIDTHS = ["40%", "10%", "25%", "25%"]  # a long prompt wraps: the answers stay in sight


@dataclass(kw_only=True)
class RunsTab:
    table: gr.Dataframe
    run: gr.Dropdown
    refresh: gr.Button
    open: gr.Button
    resume: gr.Button
    export_kind: gr.Radio
    export: gr.Button
    file: gr.File
    message: gr.Markdown
    trace: gr.DownloadButton  # the chosen run's Perfetto trace, one click
    delete: gr.Button
    confirm: gr.Checkbox
    try_inputs: list  # prompts, use eval rows, eval rows, new tokens
    try_button: gr.Button
    try_table: gr.Dataframe
    try_message: gr.Markdown


# Each column as wide as its longest word (a date, "(reference)", "csv:desks.csv"), no wider: together they
# fit the table's width on a page 1280 px wide or more (Gradio's default sizes let the last columns scroll
# out of sight). Headers and cells wrap between words only (page_script.PAGE_CSS), and after a hyphen that
# a letter follows, as the browser breaks lines: a run id and a readout take two lines, not one wide one.
COLUMN_PX = {"run": 151, "started": 101, "method": 109, "dataset": 126, "readout": 92, "seed": 50, "K·b·m": 76,
             "steps": 58, "run time": 52, "faults": 67, "state": 110, "label acc.": 58, "samples/s": 92,
             "peak act. MiB": 58}
TABLE_FITS_PX = 1200  # the table's width on a 1280 px page (1214 px on Gradio 6's layout)


def build_runs_tab(runs_root: Path) -> RunsTab:
    """`runs_root` is only shown: every action names a run by its id under it (RunsRoot)."""
    gr.Markdown(f"Runs under `{runs_root}`: each keeps its config, events, metrics and trace, so it can be "
                "reopened after a restart. Open the trace at ui.perfetto.dev.")
    table = gr.Dataframe(headers=COLUMNS, interactive=False, wrap=True, column_widths=list(COLUMN_PX.values()),
                         elem_id=RUNS_TABLE_ID)
    with gr.Row():
        run = gr.Dropdown(choices=[], label="run", scale=4, elem_id="runs-pick", allow_custom_value=True)
        refresh = gr.Button("Refresh", scale=1)
        open_ = gr.Button("Open in Watch live", scale=1, elem_id="runs-open")
        resume = gr.Button("Resume", scale=1, elem_id="runs-resume")
        trace = gr.DownloadButton("Perfetto trace", value=None, scale=1, elem_id="runs-trace")
    message = gr.Markdown(elem_id="runs-message")  # right under the buttons: what they did, or why not
    with gr.Row():
        confirm = gr.Checkbox(label="yes, delete the chosen run's directory", value=False, scale=3,
                              elem_id="runs-delete-confirm")
        delete = gr.Button("Delete", variant="stop", scale=1, elem_id="runs-delete")
    with gr.Row():
        kind = gr.Radio(list(EXPORTS), value=EXPORTS[0], label="export", scale=4, elem_id="runs-export-kind")
        export = gr.Button("Export", scale=1, elem_id="runs-export")
    file = gr.File(label="exported file", interactive=False, height=90)
    try_inputs, try_button, try_table, try_message = _try_it_panel()
    gr.Markdown("**Resume** continues a crashed or stopped run from the newest step every stage has a "
                "verified checkpoint of (a BP reference run only if it was given `--ckpt-every`, as the studies' "
                "are); the result equals an unfailed run bit for bit. PipeDream runs cannot be failed or resumed: with several weight versions in flight no "
                "step is a consistent checkpoint of every stage.")
    return RunsTab(table=table, run=run, refresh=refresh, open=open_, resume=resume, export_kind=kind, export=export,
                   file=file, message=message, trace=trace, delete=delete, confirm=confirm, try_inputs=try_inputs,
                   try_button=try_button, try_table=try_table, try_message=try_message)


def _try_it_panel() -> tuple:
    """Prompts (or the run's first eval rows) put to the base model and to the chosen run's fine-tuned one."""
    gr.Markdown("**Try it**: the base model and the fine-tuned one answer the same prompts, framed as the run "
                "trained (its task's cue, or the chat template): on a classification run each picks the label it "
                "scores highest (✓ / ✗ against an eval row's label), on a prompt → response run each writes "
                "greedily (so always the same words)", elem_id="try-heading")
    with gr.Row():
        prompts = gr.Textbox(label="prompts (one a line)", lines=3, scale=4, elem_id="try-prompts",
                             placeholder="a late goal wins the cup")
        with gr.Column(scale=2, min_width=240):
            use_eval = gr.Checkbox(label="use eval rows (with their expected answers)", value=False,
                                   elem_id="try-use-eval")
            rows = gr.Slider(1, 20, value=5, step=1, label="eval rows")
            new_tokens = gr.Slider(1, 32, value=DEFAULT_NEW_TOKENS, step=1,
                                   label="new tokens (prompt → response runs)")
        button = gr.Button("Try it", scale=1, elem_id="try-it")
    message = gr.Markdown(elem_id="try-message")
    table = gr.Dataframe(headers=TRY_COLUMNS, interactive=False, wrap=True, column_widths=TRY_WIDTHS,
                         elem_id="try-table")
    return [prompts, use_eval, rows, new_tokens], button, table, message


def try_it(controller: EngineController, name: str | None, prompts: str, use_eval: bool, rows: float,
           new_tokens: float) -> tuple:
    """The table of base vs fine-tuned answers for the chosen run, and a line saying what was done or why not."""
    texts = tuple(line.strip() for line in (prompts or "").splitlines() if line.strip())
    try:
        rd = controller.root.resolve(name)
        request = GenerateRequest(prompts=texts, eval_rows=int(rows) if use_eval else 0,
                                  max_new_tokens=int(new_tokens))
        answers = generate_answers(rd.path, request)
    except (NotARun, ValueError, OSError) as err:
        return gr.skip(), f"⚠️ {err}"
    table = [[a.prompt, a.expected or "", a.marked(a.base), a.marked(a.tuned)] for a in answers]
    return table, f"`{name}`: {_summary(answers)}"


def _summary(answers: list[Answer]) -> str:
    """"fine-tuned 7/8 correct, base 2/8" on a classification run; how many answers changed on a response run."""
    counts = tally(answers)
    if counts is None:
        changed = sum(a.base != a.tuned for a in answers)
        return f"{changed} of {len(answers)} answers changed by the fine-tuning."
    how = "each model answers the label it scores highest"
    if not counts.rows:
        return f"{how}; your prompts have no expected label (tick *use eval rows* to count correct answers)."
    return (f"**fine-tuned {counts.tuned}/{counts.rows} correct, base {counts.base}/{counts.rows}** "
            f"over the {counts.rows} eval rows shown ({how}).")


def picked_row(rows: Any, evt: gr.SelectData) -> str | None:
    """A click anywhere in a row picks that row's run."""
    row = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
    values = rows.values.tolist() if hasattr(rows, "values") else rows
    return values[row][0] if 0 <= row < len(values) else None


def trace_file(controller: EngineController, name: str | None) -> gr.DownloadButton:
    """The chosen run's trace behind the download button (none for a name that is not a run here)."""
    try:
        return gr.DownloadButton(value=str(chrome_trace(controller.root.resolve(name))), interactive=True)
    except (NotARun, ExportError, OSError):  # no events yet (a reference run, or one still starting)
        return gr.DownloadButton(value=None, interactive=False)


def delete_run(controller: EngineController, name: str | None, confirmed: bool) -> tuple:
    """Delete a run directory under the runs root (never a live one, never outside the root)."""
    if not name:
        return "Choose a run first.", gr.skip(), gr.skip(), False
    if not confirmed:
        return "Tick the box first: deleting removes the run's checkpoints, events and metrics.", gr.skip(), \
            gr.skip(), False
    try:
        controller.delete(name)
    except (NotARun, ValueError, OSError) as err:
        return f"⚠️ {err}", gr.skip(), gr.skip(), False
    rows, pick = refresh(controller, None)
    return f"Deleted `{name}`.", rows, pick, False


def refresh(controller: EngineController, current: str | None) -> tuple:
    rows = runs_table(controller.root)
    names = [r[0] for r in rows]
    return rows, gr.Dropdown(choices=names, value=current if current in names else (names[0] if names else None))


def export(controller: EngineController, name: str | None, kind: str) -> tuple[str | None, str]:
    if kind not in EXPORTS:
        return None, f"⚠️ {kind!r} is not one of {', '.join(EXPORTS)}"
    try:
        rd = controller.root.resolve(name)
        if kind in MODEL_EXPORTS:
            path, note = model_zip(rd, MODEL_EXPORTS[kind])
            return str(path), f"Wrote `{path}`." + (f" Note: {note}." if note else "")
        if kind == "events CSV":
            path = events_csv(rd)
        elif kind == "Chrome / Perfetto trace":
            path = chrome_trace(rd)
        else:
            data = load_run(rd, name=name)
            if not data.events:
                raise ExportError(f"{name} has no events to draw (reference runs record none)")
            if kind == "PNG: timeline":
                fig, stem = timeline_figure(data.events, stages=data.stages, title=data.label), "timeline"
            else:
                peaks = [p["peak_activation_bytes"] for p in (data.metrics.per_stage if data.metrics else [])]
                fig, stem = memory_figure(data.events, stages=data.stages, title=data.label,
                                          peak_bytes=peaks if len(peaks) == data.stages else None), "memory"
            path = figure_png(fig, rd.export(f"{stem}.png"))
    except (NotARun, ExportError, ValueError, OSError) as err:
        return None, f"⚠️ {err}"
    return str(path), f"Wrote `{path}`."
