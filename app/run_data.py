"""A run directory read back from disk: config, events, metrics (a finished, stopped, or
interrupted run; the app can reopen any of them after a restart)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerolock_core.telemetry import read_events

from zerolock_core.palette import method_label

APP_RECORD = "dashboard.json"  # written by the app next to the engine's files: batch, method, runtime


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass(kw_only=True)
class RunData:
    name: str
    dir: Path
    method: str  # zerolock | gpipe | 1f1b | pipedream | bp (reference runs: bp or zerolock-reference)
    runtime: str
    stages: int
    config: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] | None = None
    batch: str = ""
    app_state: str = ""  # the state the dashboard recorded when the run ended, if it started it

    @property
    def state(self) -> str:
        if self.metrics is not None:
            return self.metrics.get("state", "finished")  # reference metrics have no state: they finished
        # no metrics.json: stopped reference runs, or runs whose coordinator died (the app was killed)
        return self.app_state or ("interrupted" if self.events else "no results")

    @property
    def label(self) -> str:
        t = self.config.get("train", {})
        name = method_label(self.method) if self.runtime == "pipeline" or self.method == "bp" else \
            f"{method_label(self.method)} (reference)"
        return f"{name} K={t.get('stages')} b={t.get('batch')} m={t.get('microbatches')}"


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / f).exists() for f in ("config.json", "metrics.json", APP_RECORD))


def load_run(path: str | Path, *, with_events: bool = True) -> RunData:
    path = Path(path)
    if not is_run_dir(path):
        raise FileNotFoundError(f"{path} is not a run directory (no config.json, metrics.json or {APP_RECORD})")
    record = read_json(path / APP_RECORD) or {}
    metrics = read_json(path / "metrics.json")
    config = read_json(path / "config.json") or (metrics or {}).get("config") or record.get("config") or {}
    train = config.get("train", {})
    events = read_events(path / "events.jsonl")[0] if with_events else []
    return RunData(name=path.name, dir=path, method=record.get("method", train.get("method", "?")),
                   runtime=train.get("runtime", "?"), stages=int(train.get("stages", 1)), config=config,
                   events=events, metrics=metrics, batch=record.get("batch", ""),
                   app_state=record.get("state", ""))
