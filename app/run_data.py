"""A run directory read back from disk: config, events, its record (a finished, stopped, failed or
interrupted run; the app can reopen any of them after a restart)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zerolock_core.rundir.atomic_files import read_json
from zerolock_core.rundir.metrics import Metrics
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.telemetry import read_events

from .run_label import run_label


@dataclass(kw_only=True)
class RunData:
    name: str  # the run id: its path under the runs root
    rd: RunDir
    method: str  # zerolock | gpipe | 1f1b | pipedream | bp (reference runs: bp or zerolock-reference)
    runtime: str
    stages: int
    config: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    metrics: Metrics | None = None
    batch: str = ""
    started: str = ""  # when the dashboard started it ("" for a run started elsewhere)
    app_state: str = ""  # the state the dashboard recorded when the run ended, if it started it
    live: bool = False  # a process holds its lock: it is running right now

    @property
    def state(self) -> str:
        if self.metrics is not None:
            return self.metrics.state
        if self.live:
            return "running"
        # no record and nobody writing it: the process that ran it was killed (or the app was)
        return self.app_state or ("interrupted" if self.events or self.rd.event_files() else "no results")

    @property
    def label(self) -> str:
        """Its name in every view, with b and m (run_label.py)."""
        return run_label(self.config, method=self.method, stages=self.stages, shape=True)

    @property
    def choice(self) -> tuple[str, str]:
        """A picker's entry: the label shown, the run id picked."""
        return f"{run_label(self.config, method=self.method, stages=self.stages)} ({self.name})", self.name


def load_run(rd: RunDir, *, name: str | None = None, with_events: bool = True) -> RunData:
    """A run directory's contents; FileNotFoundError when it holds no run."""
    if not rd.path.is_dir() or not rd.holds_a_run():
        raise FileNotFoundError(f"{rd.name} holds no run")
    record = read_json(rd.app_record) or {}
    metrics = rd.read_metrics()
    config = read_json(rd.config_json) or (metrics.config if metrics else None) or record.get("config") or {}
    train = config.get("train", {})
    events = read_events(rd.event_files())[0] if with_events else []
    return RunData(name=name or rd.name, rd=rd, method=record.get("method", train.get("method", "?")),
                   runtime=train.get("runtime", "?"), stages=int(train.get("stages", 1)), config=config,
                   events=events, metrics=metrics, batch=record.get("batch", ""), started=record.get("started", ""),
                   app_state=record.get("state", ""), live=metrics is None and rd.is_live())
