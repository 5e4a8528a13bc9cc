"""The app's one engine controller: starts runs in their own processes, one after another,
tails their telemetry, stops them. The web server's threads only call into this object; the
training itself runs in the runtime's stage processes (or the reference trainer's child)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerolock_core.artifacts import write_json_atomic
from zerolock_core.config import RunConfig
from zerolock_core.runtime.run import Run
from zerolock_core.telemetry import read_events
from zerolock_core.telemetry.lifecycle import LIFECYCLE_FILE, read_lifecycle

from zerolock_core.telemetry.activity import ActivityFold, StageStats
from .reference_job import ReferenceJob
from .run_data import APP_RECORD, load_run, read_json

TERMINAL = ("finished", "stopped", "failed", "cancelled")


@dataclass(kw_only=True)
class Tracked:
    """A run the app started (live) or reopened from disk (engine is None)."""
    name: str
    dir: Path
    cfg: dict[str, Any]
    method: str
    batch: str
    engine: Run | ReferenceJob | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    lifecycle: list[dict[str, Any]] = field(default_factory=list)  # STARTUP spans (telemetry/lifecycle.py)
    offset: int = 0
    state: str = "queued"
    metrics: dict[str, Any] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _fold: ActivityFold | None = field(default=None, repr=False)
    _stats: tuple[int, list[StageStats]] = (-1, [])
    _lifecycle_size: int = -1

    def activity(self) -> ActivityFold:
        """The per-stage numbers of the events so far: only the events that arrived since the last call
        are folded in (the list only grows; a shorter one is folded afresh)."""
        with self._lock:  # the app's request threads ask concurrently: fold each event once
            fold = self._fold
            if fold is None or fold.events > len(self.events):
                fold = ActivityFold(stages=self.stages)
            if fold.events < len(self.events):
                fold.add(self.events[fold.events:])
            self._fold = fold
            return fold

    def stage_stats(self) -> list[StageStats]:
        """Per-stage numbers from the events so far (made again only when new events arrived)."""
        fold = self.activity()
        n, stats = self._stats
        if n != fold.events:
            n, stats = fold.events, fold.stats()
            self._stats = (n, stats)
        return stats

    def span_s(self) -> float:
        """First start to last end of the events so far (timebase.span_s, from the fold)."""
        return self.activity().makespan_s

    @property
    def stages(self) -> int:
        return int(self.cfg["train"]["stages"])

    @property
    def engine_done(self) -> bool:
        return self.state in TERMINAL or self.state == "interrupted"

    @property
    def runtime(self) -> str:
        return self.cfg["train"]["runtime"]

    def refresh(self) -> None:
        """Read new events and the engine's state (cheap; safe from any thread)."""
        with self._lock:
            new, self.offset = read_events(self.dir / "events.jsonl", offset=self.offset)
            self.events.extend(new)
            size = (self.dir / LIFECYCLE_FILE).stat().st_size if (self.dir / LIFECYCLE_FILE).exists() else 0
            if size != self._lifecycle_size:  # a few lines per run: reread whole when it grew
                self.lifecycle, self._lifecycle_size = read_lifecycle(self.dir), size
            if self.engine is not None:
                self.state = self.engine.state if self.state != "cancelled" else self.state
                if self.engine.done and self.metrics is None:
                    self.metrics = self.engine.metrics or read_json(self.dir / "metrics.json")

    def status(self) -> dict[str, Any]:
        st = self.engine.status() if self.engine is not None else {}
        if self.metrics and "steps_done" in self.metrics:  # an ended Run's status() no longer knows its steps
            st["steps_done"] = self.metrics["steps_done"]
        recoveries = st.get("recoveries") if self.engine is not None else (self.metrics or {}).get("recovery")
        return {"name": self.name, "method": self.method, "batch": self.batch, "dir": str(self.dir),
                "state": self.state, "stages": self.stages, "events": len(self.events),
                "steps_done": st.get("steps_done"), "total_steps": self.cfg["train"]["steps"],
                "elapsed_s": st.get("elapsed_s"), "eta_s": st.get("eta_s"), "s_per_step": st.get("s_per_step"),
                "stage_states": st.get("stage_states", []), "eval_progress": st.get("eval_progress"),
                "recoveries": list(recoveries or []), "open_recoveries": st.get("open_recoveries", []),
                "error": st.get("error", "")}


def failures(status: dict[str, Any]) -> list[dict[str, Any]]:
    """Every recovery of a run so far, closed and under way, with its instants (for the timeline),
    from its `Tracked.status()` (one engine status per tick serves the text and the figures)."""
    return [*status.get("recoveries", []), *status.get("open_recoveries", [])]


class EngineController:
    def __init__(self, runs_root: str | Path) -> None:
        self.runs_root = Path(runs_root)
        self._lock = threading.Lock()
        self._batch: list[Tracked] = []
        self._batch_id = ""
        self._watched: Tracked | None = None
        self._cancel = threading.Event()
        self._sequencer: threading.Thread | None = None
        self._closed = False

    # ---- starting and stopping ------------------------------------------------------------
    def new_run_dir(self, method: str, stages: int) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = self.runs_root / f"{stamp}-{method}-K{stages}"
        path, n = base, 1
        while path.exists():
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        return path

    @property
    def busy(self) -> bool:
        return self._sequencer is not None and self._sequencer.is_alive()

    def start(self, configs: list[RunConfig], *, resume: bool = False) -> list[Tracked]:
        """Run `configs` one after another (a batch). One batch at a time per app. `resume`: continue
        runs whose directories hold checkpoints (see `resume()`)."""
        if self._closed:
            raise RuntimeError("the dashboard is shutting down")
        if not configs:
            raise ValueError("nothing to run")
        with self._lock:
            if self.busy:
                raise RuntimeError("a run is already in progress; stop it first")
            self._batch_id = time.strftime("%Y%m%d-%H%M%S")
            self._batch = [Tracked(name=Path(str(c.out)).name, dir=Path(str(c.out)), cfg=c.to_dict(),
                                   method=c.train.method, batch=self._batch_id) for c in configs]
            self._watched = self._batch[0]
            self._cancel.clear()
            pairs = list(zip(configs, self._batch))
            self._sequencer = threading.Thread(target=self._run_batch, args=(pairs, resume),
                                               name="zerolock-dashboard-batch", daemon=True)
            self._sequencer.start()
        return list(self._batch)

    def resume(self, run_dir: str | Path) -> Tracked:
        """Continue a crashed or stopped pipeline run from its newest verified checkpoints, as
        `zerolock train --resume DIR` does; ConfigError (a ValueError) says why not."""
        from zerolock_core.config import replace
        from zerolock_core.runtime.run_dir import check_resumable, saved_config

        cfg = replace(saved_config(Path(run_dir)), out=str(run_dir))
        if cfg.train.runtime != "pipeline":
            raise ValueError("only pipeline runs can be resumed (a reference run has no checkpoints)")
        check_resumable(Path(run_dir), cfg)
        return self.start([cfg], resume=True)[0]

    def _run_batch(self, pairs: list[tuple[RunConfig, Tracked]], resume: bool = False) -> None:
        """Starts each run and waits for it; no training here (the engines run in child processes)."""
        for cfg, tracked in pairs:
            if self._cancel.is_set():
                tracked.state = "cancelled"
                continue
            tracked.dir.mkdir(parents=True, exist_ok=True)
            self._write_record(tracked, started=True)
            engine = ReferenceJob(cfg) if cfg.train.runtime == "reference" else Run(cfg, resume=resume)
            tracked.engine = engine
            with self._lock:
                self._watched = tracked
            try:
                engine.start()
            except Exception as err:  # e.g. a process could not be spawned; shown in the status line
                tracked.state = "failed"
                self._write_record(tracked, error=f"{type(err).__name__}: {err}")
                continue
            while not engine.done:
                if self._cancel.is_set():
                    engine.stop(wait=False)
                time.sleep(0.2)
            if isinstance(engine, Run):
                engine.wait()
            tracked.refresh()
            self._write_record(tracked)

    def _write_record(self, t: Tracked, *, started: bool = False, error: str = "") -> None:
        path = t.dir / APP_RECORD
        record = read_json(path) or {"batch": t.batch, "method": t.method, "config": t.cfg,
                                     "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        if not started:
            record["state"] = t.state
            record["ended"] = time.strftime("%Y-%m-%d %H:%M:%S")
        if error:
            record["error"] = error
        write_json_atomic(path, record)

    def stop(self) -> str:
        """Stop the current run and cancel the rest of its batch."""
        with self._lock:
            watched = self._watched if self.busy else None
            self._cancel.set()
        if watched is None or watched.engine is None:
            return "nothing is running"
        watched.engine.stop(wait=False)
        return f"stopping {watched.name}: every stage finishes its current action and saves"

    def close(self, timeout: float = 30.0) -> None:
        """Closing the app stops its runs."""
        self._closed = True
        self._cancel.set()
        for t in list(self._batch):
            if t.engine is not None and not t.engine.done:
                t.engine.stop(wait=True, timeout=timeout)
        if self._sequencer is not None:
            self._sequencer.join(timeout)

    # ---- observing ------------------------------------------------------------------------
    def watched(self) -> Tracked | None:
        with self._lock:
            return self._watched

    def batch(self) -> list[Tracked]:
        with self._lock:
            return list(self._batch)

    def open(self, run_dir: str | Path) -> Tracked:
        """Reopen a run from disk (e.g. after a restart) and watch it."""
        data = load_run(run_dir)
        t = Tracked(name=data.name, dir=data.dir, cfg=data.config, method=data.method, batch=data.batch,
                    events=data.events, lifecycle=read_lifecycle(data.dir), state=data.state, metrics=data.metrics)
        t.offset = (data.dir / "events.jsonl").stat().st_size if (data.dir / "events.jsonl").exists() else 0
        with self._lock:
            if self.busy:
                raise RuntimeError("a run is in progress; open saved runs when it has ended")
            self._watched = t
        return t
