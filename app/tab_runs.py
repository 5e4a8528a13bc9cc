"""Runs tab: every run directory under the runs root, reopen one, export its files."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from zerolock_core.runs_root import NotARun

from .controller import EngineController
from .exports import ExportError, chrome_trace, events_csv, figure_png
from .memory import memory_figure
from .run_data import load_run
from .page_script import RUNS_TABLE_ID
from .runs_index import COLUMNS, runs_table
from .timeline import timeline_figure

EXPORTS = ("events CSV", "Chrome / Perfetto trace", "PNG: timeline", "PNG: memory")


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


# Each column as wide as its longest word (a run id, a date and time, "interrupted"), no wider: together
# they fit the table's width on a page 1280 px wide or more (Gradio's default sizes let the last columns
# scroll out of sight). Headers and cells wrap between words only (page_script.PAGE_CSS).
COLUMN_PX = {"run": 245, "started": 176, "method": 92, "K": 36, "b": 36, "m": 36, "steps": 60, "duration": 86,
             "failures": 88, "state": 110, "label acc.": 70, "samples/s": 92, "peak act. MiB": 72}
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
        kind = gr.Radio(list(EXPORTS), value=EXPORTS[0], label="export", scale=4)
        export = gr.Button("Export", scale=1, elem_id="runs-export")
    file = gr.File(label="exported file", interactive=False, height=90)
    gr.Markdown("**Resume** continues a crashed or stopped pipeline run from the newest step every stage has a "
                "verified checkpoint of; the result equals an unfailed run bit for bit. PipeDream runs cannot be failed or resumed: with several weight versions in flight no "
                "step is a consistent checkpoint of every stage.")
    return RunsTab(table=table, run=run, refresh=refresh, open=open_, resume=resume, export_kind=kind, export=export,
                   file=file, message=message, trace=trace, delete=delete, confirm=confirm)


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
    except (NotARun, ExportError, OSError) as err:
        return None, f"⚠️ {err}"
    return str(path), f"Wrote `{path}`."
