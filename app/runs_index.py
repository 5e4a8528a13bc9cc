"""The runs root: every run directory in it, newest first, as table rows."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .run_data import APP_RECORD, RunData, is_run_dir, load_run, read_json

COLUMNS = ["run", "started", "method", "K", "b", "m", "steps", "duration", "failures", "state", "label acc.",
           "samples/s", "peak act. MiB"]


def list_runs(root: str | Path) -> list[RunData]:
    """Run directories directly under `root` (and one level deeper, for grouped runs), newest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        if is_run_dir(p):
            found.append(p)
        elif p.is_dir():
            found += [q for q in p.iterdir() if is_run_dir(q)]
    found.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    return [load_run(p, with_events=False) for p in found]


def _started(r: RunData) -> str:
    record = read_json(r.dir / APP_RECORD) or {}
    if record.get("started"):
        return record["started"]
    config = r.dir / "config.json"  # written as the run starts
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime((config if config.exists() else r.dir).stat().st_mtime))


def _duration(m: dict[str, Any]) -> str | None:
    """Start-up + training (+ the final eval where recorded), as the user waited for it."""
    if "wall_s" not in m:
        return None
    total = m["wall_s"] + m.get("setup_s", 0.0)
    return f"{total:.0f} s" if total < 120 else f"{total / 60:.1f} min"


def run_row(r: RunData, root: Path) -> list[Any]:
    t = r.config.get("train", {})
    m = r.metrics or {}
    acc = (m.get("eval") or {}).get("label_accuracy")
    tput = m.get("throughput_samples_per_s", m.get("samples_per_s"))
    peaks = [p.get("peak_activation_bytes", 0) for p in m.get("per_stage") or []]
    failures = len(m.get("recovery") or []) if m else len(t.get("failures") or [])
    return [str(r.dir.relative_to(root)) if r.dir.is_relative_to(root) else str(r.dir), _started(r),
            r.label.split(" K=")[0], t.get("stages"), t.get("batch"), t.get("microbatches"), t.get("steps"),
            _duration(m), failures, r.state, None if acc is None else round(acc, 3),
            None if tput is None else round(tput, 1), round(max(peaks) / 2**20, 2) if peaks else None]


def runs_table(root: str | Path) -> list[list[Any]]:
    root = Path(root)
    return [run_row(r, root) for r in list_runs(root)]
