"""Exports of a run: events as CSV, the Chrome/Perfetto trace, a figure as PNG, the fine-tuned model as a zip
(under its exports/)."""
from __future__ import annotations

import csv
import os
import shutil
import tempfile
from pathlib import Path

import plotly.graph_objects as go

from zerolock_core.export.peft_export import ExportTargets, export_run
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.export.trained_model import check_trained_run
from zerolock_core.telemetry import read_events, write_chrome_trace

EVENT_COLUMNS = ["stage", "kind", "mb", "t0", "t1", "act_bytes", "inflight", "sent", "recv", "step", "gen"]
# the CSV header says each column's unit (an event field -> its column name)
CSV_HEADER = {"t0": "t0_ns (monotonic)", "t1": "t1_ns (monotonic)", "act_bytes": "act_bytes (held after)",
              "inflight": "inflight (micro-batches held)", "sent": "sent_bytes", "recv": "recv_bytes",
              "step": "step (optimizer steps done)", "gen": "gen (process generation)", "loss": "loss (nats)"}


class ExportError(RuntimeError):
    """An export could not be made; the message says why and what to do instead."""


def events_csv(rd: RunDir) -> Path:
    events, _ = read_events(rd.event_files())
    if not events:
        raise ExportError(f"{rd.name} has no events (reference runs record none)")
    extra = sorted({k for e in events for k in e} - set(EVENT_COLUMNS))  # keep fields newer engines add
    path = rd.export("events.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=EVENT_COLUMNS + extra, restval="")
        w.writerow({k: CSV_HEADER.get(k, k) for k in w.fieldnames})
        w.writerows(events)
    return path


def chrome_trace(rd: RunDir) -> Path:
    """The run's trace (written by the engine at the end); built from the events if the run never got
    there (stopped by a crash)."""
    if rd.trace.exists():
        return rd.trace
    events, _ = read_events(rd.event_files())
    if not events:
        raise ExportError(f"{rd.name} has no events to make a trace from")
    stages = 1 + max(e["stage"] for e in events)
    path = rd.export(rd.trace.name)
    write_chrome_trace(path, events, stages=stages)
    return path


def figure_png(fig: go.Figure, path: str | Path, *, width: int = 1200) -> Path:
    """PNG through plotly's `write_image` (kaleido, which drives a local Chrome/Chromium)."""
    path = Path(path)
    try:
        fig.write_image(str(path), format="png", width=width, scale=2)
    except Exception as err:  # kaleido missing, or no Chrome/Chromium for it to drive
        raise ExportError(f"PNG export needs kaleido and Chrome/Chromium ({type(err).__name__}: {err}); "
                          "use the camera button in the plot's toolbar instead") from None
    return path


MODEL_ZIPS = {"peft": "peft-adapter", "merged": "merged-model"}  # ExportTargets' field -> the zip's name


def model_zip(rd: RunDir, kind: str) -> tuple[Path, str]:
    """The run's fine-tuned model zipped under exports/: `peft` its LoRA adapter in PEFT's layout, `merged` the
    whole model with it merged in. Built in a temporary folder beside the zip, which replaces an older one.
    Also returns what the model leaves out (export_adapters: the readouts), "" when nothing."""
    assert kind in MODEL_ZIPS, kind
    check_trained_run(rd.path)  # before exports/ is made
    target = rd.export(f"{MODEL_ZIPS[kind]}.zip")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".model-") as tmp:
        result = export_run(rd.path, ExportTargets(**{kind: Path(tmp) / MODEL_ZIPS[kind]}))
        archive = shutil.make_archive(str(Path(tmp) / "zip"), "zip", root_dir=tmp, base_dir=MODEL_ZIPS[kind])
        os.replace(archive, target)
    return target, result.note
