"""The app's one engine controller: starts runs as the engine's jobs, one after another, tails their
telemetry, stops them. The web server's threads only call into this object; the training itself runs
in the jobs' own processes.

Every request about an existing run names it by its id under the runs root (`RunsRoot.resolve`):
nothing outside that folder is ever opened, resumed, exported, compared or deleted.
"""
from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerolock_core.config.run_config import RunConfig, replace
from zerolock_core.jobs.base import TERMINAL as JOB_ENDS
from zerolock_core.jobs.base import JobState
from zerolock_core.jobs.job import Job, make_job
from zerolock_core.rundir.atomic_files import read_json, write_json_atomic
from zerolock_core.rundir.metrics import Metrics
from zerolock_core.rundir.run_dir import RunDir, check_resumable
from zerolock_core.rundir.runs_root import RunsRoot
from zerolock_core.rundir.shown_path import scrub
from zerolock_core.telemetry.events import Cursor, read_events
from zerolock_core.telemetry.activity import ActivityFold, StageStats
from zerolock_core.telemetry.lifecycle import read_lifecycle

from .run_data import load_run

TERMINAL = (*JOB_ENDS, "cancelled")  # a job's ends, and the app's: stopped before it started


@dataclass(kw_only=True)
class Tracked:
    """A run the app started (live) or reopened from disk (engine is None)."""
    name: str  # its id under the runs root
    rd: RunDir
    cfg: dict[str, Any]
    method: str
    batch: str
    engine: Job | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    lifecycle: list[dict[str, Any]] = field(default_factory=list)  # STARTUP spans (telemetry/lifecycle.py)
    cursor: Cursor = field(default_factory=dict)  # how far its event files have been read
    state: str = "queued"  # a JobState's name, or the app's own: queued, cancelled, interrupted
    metrics: Metrics | None = None
    error: str = ""  # why it could not start
    inject_note: str = ""  # what the Inject panel last said about this run (failure_panel.py)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _fold: ActivityFold | None = field(default=None, repr=False)
    _stats: tuple[int, list[StageStats]] = (-1, [])
    _lifecycle_size: int = -1

    @property
    def dir(self) -> Path:
        return self.rd.path

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
            new, self.cursor = read_events(self.rd.event_files(), cursor=self.cursor)
            self.events.extend(new)
            size = self.rd.lifecycle.stat().st_size if self.rd.lifecycle.exists() else 0
            if size != self._lifecycle_size:  # a few lines per run: reread whole when it grew
                self.lifecycle, self._lifecycle_size = read_lifecycle(self.rd.lifecycle), size
            if self.engine is not None:
                self.state = str(self.engine.state) if self.state != "cancelled" else self.state  # a JobState's name
                if self.engine.done and self.metrics is None:
                    self.metrics = self.engine.metrics or self.rd.read_metrics()

    def status(self) -> dict[str, Any]:
        """The dashboard's status of this run (its /status API): the app's own fields and its job's
        `JobStatus` fields — the ones the CLI's progress words read —, None or empty where no job runs
        (a queued run, or one reopened from disk: its metrics say what it recorded)."""
        job = self.engine.status() if self.engine is not None else None
        if self.metrics is not None:  # an ended job's own count
            steps_done = self.metrics.steps_done
        else:
            steps_done = job.steps_done if job is not None else None

        def recorded(live: list[dict[str, Any]] | None, on_disk: str) -> list[dict[str, Any]]:
            """A live run's engine says (its status); an ended run read back from disk, its metrics
            (`on_disk`); a run with neither, none."""
            if job is not None:
                return list(live or [])
            return list(getattr(self.metrics, on_disk) or []) if self.metrics is not None else []

        return {"name": self.name, "method": self.method, "batch": self.batch, "dir": self.name,  # relative to the runs folder: no server path
                "state": self.state, "stages": self.stages, "events": len(self.events),
                "steps_done": steps_done, "total_steps": self.cfg["train"]["steps"],
                "elapsed_s": job.elapsed_s if job else None, "eta_s": job.eta_s if job else None,
                "s_per_step": job.s_per_step if job else None,
                "stage_states": job.stage_states if job else [], "eval_progress": job.eval_progress if job else None,
                "recoveries": recorded(job and job.recoveries, "recovery"),
                "open_recoveries": job.open_recoveries if job else [],
                "stragglers": recorded(job and job.stragglers, "stragglers"),
                "error": (job.error if job else "") or self.error, "stopping": bool(job and job.stopping)}


def failures(status: dict[str, Any]) -> list[dict[str, Any]]:
    """Every recovery of a run so far, closed and under way, with its instants (for the timeline),
    from its `Tracked.status()` (one engine status per tick serves the text and the figures)."""
    return [*status.get("recoveries", []), *status.get("open_recoveries", [])]


class EngineController:
    def __init__(self, runs_root: str | Path) -> None:
        self.root = RunsRoot(runs_root)
        self._lock = threading.Lock()
        self._batch: list[Tracked] = []
        self._batch_id = ""
        self._watched: Tracked | None = None
        self._cancel = threading.Event()
        self._sequencer: threading.Thread | None = None
        self._closed = False

    @property
    def runs_root(self) -> Path:
        return self.root.path

    def said(self, text: object) -> str:
        """`text` as a client may read it: a path in the runs folder (a data file's, a run's, in an engine's
        message) relative to it, the folder itself as `runs`, never where this server keeps them."""
        return scrub(str(text), self.root.path, name="runs")

    # ---- starting and stopping ------------------------------------------------------------------
    def new_run_dir(self, method: str, stages: int) -> Path:
        return self.root.new_run(method, stages).path

    @property
    def busy(self) -> bool:
        return self._sequencer is not None and self._sequencer.is_alive()

    def start(self, configs: list[RunConfig], *, resume: bool = False) -> list[Tracked]:
        """Run `configs` one after another (a batch). One batch at a time per app. `resume`: continue
        runs whose directories hold checkpoints (see `resume()`). Every config's directory must be in
        the runs root."""
        if self._closed:
            raise RuntimeError("the dashboard is shutting down")
        if not configs:
            raise ValueError("nothing to run")
        rds = [RunDir(str(c.out)) for c in configs]
        if not all(self.root.contains(rd) for rd in rds):
            raise ValueError("a run's directory must be inside the runs folder")
        with self._lock:
            if self.busy:
                raise RuntimeError("a run is already in progress; stop it first")
            self._batch_id = time.strftime("%Y%m%d-%H%M%S")
            self._batch = [Tracked(name=self.root.run_id(rd), rd=rd, cfg=c.to_dict(), method=c.train.method,
                                   batch=self._batch_id) for c, rd in zip(configs, rds)]
            self._watched = self._batch[0]
            self._cancel.clear()
            pairs = list(zip(configs, self._batch))
            self._sequencer = threading.Thread(target=self._run_batch, args=(pairs, resume),
                                               name="zerolock-dashboard-batch", daemon=True)
            self._sequencer.start()
        return list(self._batch)

    def resume(self, run_id: str) -> Tracked:
        """Continue a crashed or stopped run from its newest verified checkpoints (or only its final eval), as
        `zerolock train --resume DIR` does, either runtime (a reference run given --ckpt-every, as the
        studies' are); a ValueError (a ConfigError: render it) says why not, a run without checkpoints too."""
        rd = self.root.resolve(run_id)
        cfg = replace(rd.saved_config(), out=str(rd.path))
        if rd.is_live():
            raise ValueError(f"`{run_id}` is running right now")
        check_resumable(rd, cfg)  # here, so that the Runs tab says why not (a ConfigError, in any words)
        return self.start([cfg], resume=True)[0]

    def _run_batch(self, pairs: list[tuple[RunConfig, Tracked]], resume: bool = False) -> None:
        """Starts each run and waits for it; no training here (the jobs run in their own processes)."""
        for cfg, tracked in pairs:
            if self._cancel.is_set():
                tracked.state = "cancelled"
                continue
            engine = make_job(cfg, resume=resume)
            tracked.engine = engine
            with self._lock:
                self._watched = tracked
            try:
                engine.start()
            except Exception as err:  # a refused directory (nothing touched), a process that could not start
                tracked.state, tracked.error = JobState.FAILED.value, self.said(err)
                continue
            tracked.cfg = engine.cfg.to_dict()  # `--boundaries auto` is resolved (measured) as the job starts
            self._write_record(tracked, started=True)
            while not engine.done:
                if self._cancel.is_set():
                    engine.request_stop()
                engine.wait(0.2)
            tracked.refresh()
            self._write_record(tracked)

    def _write_record(self, t: Tracked, *, started: bool = False) -> None:
        """The app's notes next to the engine's files (batch, when, how it ended): written while the job
        holds the run's lock, or after it has ended."""
        record = read_json(t.rd.app_record) or {"batch": t.batch, "method": t.method, "config": t.cfg}
        if started:  # a resumed run keeps the time it was first started
            record.setdefault("started", time.strftime("%Y-%m-%d %H:%M:%S"))
            record.pop("state", None)
        else:
            record["state"] = t.state
            record["ended"] = time.strftime("%Y-%m-%d %H:%M:%S")
        write_json_atomic(t.rd.app_record, record)

    def stop(self) -> str:
        """Stop the current run and cancel the rest of its batch."""
        with self._lock:
            watched = self._watched if self.busy else None
            self._cancel.set()
        if watched is None or watched.engine is None:
            return "nothing is running"
        watched.engine.request_stop()
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

    # ---- observing ------------------------------------------------------------------------------
    def watched(self) -> Tracked | None:
        with self._lock:
            return self._watched

    def batch(self) -> list[Tracked]:
        with self._lock:
            return list(self._batch)

    def open(self, run_id: str) -> Tracked:
        """Reopen a run from disk (e.g. after a restart) and watch it."""
        rd = self.root.resolve(run_id)
        data = load_run(rd, name=self.root.run_id(rd))
        t = Tracked(name=data.name, rd=rd, cfg=data.config, method=data.method, batch=data.batch,
                    events=data.events, lifecycle=read_lifecycle(rd.lifecycle), state=data.state,
                    metrics=data.metrics)
        t.cursor = {p.name: p.stat().st_size for p in rd.event_files()}  # load_run read them whole
        with self._lock:
            if self.busy:
                raise RuntimeError("a run is in progress; open saved runs when it has ended")
            self._watched = t
        return t

    def delete(self, run_id: str) -> None:
        """Delete a run directory under the runs root; never a live one (its lock is held)."""
        rd = self.root.resolve(run_id)
        watched = self.watched()
        if rd.is_live() or (self.busy and watched is not None and watched.rd.path.resolve() == rd.path):
            raise ValueError(f"`{run_id}` is running: stop it first")
        shutil.rmtree(rd.path)
