"""The runs root: every run directory in it, newest first, as table rows."""
from __future__ import annotations

import time
from typing import Any

from zerolock_core.rundir.runs_root import RunsRoot

from .run_data import RunData, load_run
from .run_label import dataset_name, method_name, readout_text, seed_of

# what tells two runs apart first (run_label.py's parts: the readout always, "head" too), then the shape,
# how it went and its numbers
COLUMNS = ["run", "started", "method", "dataset", "readout", "seed", "K·b·m", "steps", "run time", "faults", "state",
           "label acc.", "samples/s", "peak act. MiB"]


def list_runs(root: RunsRoot) -> list[RunData]:
    return [load_run(rd, name=root.run_id(rd), with_events=False) for rd in root.runs()]


def _started(r: RunData) -> str:
    if r.started:
        return r.started
    written = r.rd.config_json if r.rd.config_json.exists() else r.rd.path  # written as the run starts
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(written.stat().st_mtime))


def _duration(r: RunData) -> str | None:
    """Start-up + training (+ the final eval), as the user waited for it."""
    m = r.metrics
    if m is None:
        return None
    total = m.total_s or (m.wall_s + m.setup_s)
    return f"{total:.0f} s" if total < 120 else f"{total / 60:.1f} min"


def run_row(r: RunData) -> list[Any]:
    t = r.config.get("train", {})
    m = r.metrics
    acc = m.headline_accuracy if m else None
    peaks = [p.get("peak_activation_bytes", 0) for p in (m.per_stage if m else [])]
    failures = len(m.recovery) if m else len(t.get("failures") or [])
    shape = "·".join(str(t.get(k, "?")) for k in ("stages", "batch", "microbatches"))
    return [r.name, _started(r), method_name(r.method, r.runtime), dataset_name(r.config) or None,
            readout_text(r.config), seed_of(r.config), shape, t.get("steps"), _duration(r), failures, r.state,
            None if acc is None else round(acc, 3), None if m is None else round(m.throughput_samples_per_s, 1),
            round(max(peaks) / 2**20, 2) if peaks else None]


def runs_table(root: RunsRoot) -> list[list[Any]]:
    return [run_row(r) for r in list_runs(root)]
