"""A run directory read back from disk: config, events, its record (a finished, stopped, failed or
interrupted run; the app can reopen any of them after a restart)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zerolock_core.rundir.atomic_files import read_json
from zerolock_core.rundir.metrics import Metrics
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.telemetry import read_events

from zerolock_core.viz.palette import method_label


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
        t = self.config.get("train", {})
        name = method_label(self.method) if self.runtime == "pipeline" or self.method == "bp" else \
            f"{method_label(self.method)} (reference)"
        return f"{name} K={t.get('stages')} b={t.get('batch')} m={t.get('microbatches')}"


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
