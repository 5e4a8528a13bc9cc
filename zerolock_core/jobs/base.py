"""The job lifecycle both runtimes share: its states (`JobState`), what a job says while it runs
(`JobStatus`) and the skeleton every job goes through (`JobBase`).

    created -> starting -> running <-> recovering -> finishing -> finished | stopped | failed
    created -> finishing                  (a resumed run that only lacks its final eval, or a failed start)

`JobBase` owns the parts that are the same whatever runs the training: taking the run directory
(its lock, the boundaries measured once), the stop request, the end — the runtime's own record, or
the fallback record when it could not make one — and the lock's release. A runtime's job (`Run` in
pipeline_job.py, `ReferenceJob` in reference_job.py) supplies only its launch, its watcher and its
record. This module imports no runtime: `make_job` (job.py) is the one place that knows both.
"""
from __future__ import annotations

import dataclasses
import enum
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..config.run_config import RunConfig
from ..rundir.metrics import Metrics
from ..rundir.run_dir import RunDir, RunLock

STOPPED_ON_REQUEST = "stopped on request"


class JobState(enum.StrEnum):
    """The states a job goes through; str-valued, so JSON and comparisons with the bare names work."""
    CREATED = "created"
    STARTING = "starting"  # the processes start (imports, loading, linking)
    RUNNING = "running"
    RECOVERING = "recovering"  # a failed stage is being replaced (pipeline runtime)
    FINISHING = "finishing"  # training ended: the final eval and the record
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def live(self) -> bool:
        """Its processes run (a failure can be injected, a stage can be waited for)."""
        return self in (JobState.STARTING, JobState.RUNNING, JobState.RECOVERING)


TERMINAL = (JobState.FINISHED, JobState.STOPPED, JobState.FAILED)  # rundir.metrics.STATES, as states
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    # finishing from created: the start itself failed, or only the final eval is left (a resume)
    JobState.CREATED: frozenset({JobState.STARTING, JobState.FINISHING}),
    JobState.STARTING: frozenset({JobState.RUNNING, JobState.RECOVERING, JobState.FINISHING, JobState.FAILED}),
    JobState.RUNNING: frozenset({JobState.RECOVERING, JobState.FINISHING, JobState.FAILED}),
    JobState.RECOVERING: frozenset({JobState.RUNNING, JobState.RECOVERING, JobState.FINISHING, JobState.FAILED}),
    JobState.FINISHING: frozenset(TERMINAL),
}


def can_move(old: str, new: str) -> bool:
    """Whether a job may go from `old` to `new` (staying is always allowed)."""
    return old == new or JobState(new) in TRANSITIONS.get(JobState(old), frozenset())


@dataclass(kw_only=True)
class JobStatus:
    """What a job says about itself now (`Job.status()`): the CLI's progress bar and the dashboard's
    status line both read it. Fields a runtime does not have keep their empty defaults."""
    state: JobState
    total_steps: int
    steps_done: int = 0  # optimizer steps every stage completed
    stage_states: list[str] = field(default_factory=list)  # each stage's phase (pipeline runtime)
    stage_steps: list[int] = field(default_factory=list)  # each stage's step (pipeline runtime)
    elapsed_s: float = 0.0  # since the start
    eta_s: float | None = None  # None until a rate is known
    s_per_step: float | None = None  # training time only: start-up and outages left out
    startup_s: float | None = None  # start to every stage running
    downtime_s: float = 0.0  # outages so far
    dir: str = ""
    recoveries: list[dict[str, Any]] = field(default_factory=list)  # closed recoveries
    recovering: list[int] = field(default_factory=list)  # the stages down now
    open_recoveries: list[dict[str, Any]] = field(default_factory=list)  # recoveries under way
    stragglers: list[dict[str, Any]] = field(default_factory=list)
    eval_progress: dict[str, Any] | None = None  # the final eval's phase / scored / total, while it runs
    reason: str = ""  # why the job failed or stopped, one line
    error: str = ""  # a failed job's error, when it has no record of errors
    stopping: bool = False  # a stop was asked and the job has not ended yet

    def __post_init__(self) -> None:
        self.state = JobState(self.state)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (the state as its name)."""
        d = dataclasses.asdict(self)
        d["state"] = str(self.state)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "JobStatus":
        """The status `to_dict` gave (unknown keys are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


class JobBase:
    """The lifecycle both jobs share. A runtime's job supplies:

    - `_launch()`: start its processes (after the directory is taken); an exception ends the job;
    - `_watch()`: the watcher thread's body, which calls `_end()` once the processes are gone;
    - `_record()`: the run's record at the end (None: the runtime has none, the fallback is written);
    - `status()`: a `JobStatus` (`_status(...)` fills what every job knows).
    """
    THREAD_NAME: ClassVar[str] = "zerolock-job"
    START_ERRORS: ClassVar[tuple[type[BaseException], ...]] = (Exception,)  # what a failed launch may raise
    RECORD_ON_DISK: ClassVar[bool] = False  # `_record()` reads a record the runtime already wrote
    NO_RECORD: ClassVar[str] = "the run ended without writing its record"

    cfg: RunConfig
    metrics: Metrics | None
    _stop_requested_at: float | None = None
    _thread: threading.Thread | None = None

    def __init__(self, cfg: RunConfig, *, overwrite: bool = False, resume: bool = False) -> None:
        self.cfg, self.rd = cfg, RunDir(cfg.out)
        self.dir = self.rd.path
        self.overwrite, self.resume = overwrite, resume
        self.state = JobState.CREATED
        self.reason = ""  # why the run failed (or was stopped), one line
        self.metrics = None
        self._lock = threading.RLock()  # guards the state (and whatever the runtime's job guards with it)
        self._dir_lock: RunLock | None = None  # the run directory's, held from start to end
        self._t_start = 0.0

    # ---- the start ------------------------------------------------------------------------------
    def start(self):
        """Take the directory (a bad or busy one raises ConfigError before anything is touched), then
        launch; a failure after that ends the job `failed` (metrics.json says why) instead of raising."""
        if self.state != JobState.CREATED:
            raise RuntimeError(f"run already {self.state}")
        self._dir_lock = self._take_directory()
        self._t_start = time.monotonic()
        self._started()
        try:
            self._launch()
        except self.START_ERRORS as err:
            self._end(self._launch_failed(err))
            return self
        self._thread = threading.Thread(target=self._watch, name=self.THREAD_NAME, daemon=True)
        self._thread.start()
        return self

    def _take_directory(self) -> RunLock:
        """A fresh run: `--boundaries auto` measured once, here (every process builds these), and the
        directory prepared and locked. A resumed run keeps its directory (and an auto run the boundaries it
        was made with)."""
        from ..train.auto_boundaries import resolve_auto_boundaries

        if self.resume:
            if self.rd.config_json.exists():
                self.cfg, _ = resolve_auto_boundaries(self.cfg, made_with=self.rd.saved_config())
            return self.rd.prepare_resume(self.cfg)
        self.cfg, balance = resolve_auto_boundaries(self.cfg)
        return self.rd.prepare_fresh(self.cfg, overwrite=self.overwrite, balance=balance)

    def _started(self) -> None:
        """Called once the directory is taken and the clock started, before the launch."""

    def _launch(self) -> None:
        raise NotImplementedError

    def _launch_failed(self, err: BaseException) -> str | None:
        """Why the launch failed (the job ends with it); None: the runtime recorded it itself."""
        return f"could not start the run: {type(err).__name__}: {err}"

    def _watch(self) -> None:
        raise NotImplementedError

    # ---- stopping and waiting -------------------------------------------------------------------
    def request_stop(self) -> None:
        """Ask the job to stop: every stage finishes its current action and saves; a final eval under way
        is skipped (`--resume` runs it later). Only recorded (safe from a signal handler: the job's own
        thread acts on it within a tick). Idempotent."""
        if self._stop_requested_at is None:
            self._stop_requested_at = time.monotonic()

    def stop(self, *, wait: bool = True, timeout: float | None = 60.0) -> Metrics | None:
        self.request_stop()
        return self.wait(timeout) if wait else None

    def wait(self, timeout: float | None = None) -> Metrics | None:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.metrics

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    # ---- state and status -----------------------------------------------------------------------
    def _set_state(self, new: str) -> None:
        with self._lock:
            if new == self.state:
                return
            assert can_move(self.state, new), f"run state {self.state} -> {new}"
            self.state = JobState(new)

    def _status(self, **runtime: Any) -> JobStatus:
        """A status with what every job knows, and the runtime's own fields."""
        return JobStatus(state=self.state, total_steps=self.cfg.train.steps,
                         elapsed_s=time.monotonic() - self._t_start if self._t_start else 0.0,
                         dir=str(self.dir), reason=self.reason,
                         stopping=self._stop_requested_at is not None and not self.done, **runtime)

    def status(self) -> JobStatus:
        raise NotImplementedError

    # ---- the end --------------------------------------------------------------------------------
    def _end(self, failure: str | None = None) -> None:
        """However the job ended: its record in metrics.json — the runtime's (`_record`), or the fallback
        when there is none (`failure` says why) —, a terminal state and the directory's lock released."""
        self._ending()
        metrics = None
        if failure is None:
            try:
                metrics = self._record()
            except Exception as err:  # the record itself could not be made: say so in the smallest one
                failure = self._record_failed(err)
            if metrics is None and failure is None:
                failure = self.NO_RECORD
        fallback = metrics is None
        if metrics is None:
            metrics = self._fallback_record(failure or self.NO_RECORD)
        metrics = self.rd.public_metrics(metrics)  # as metrics.json has it: no server path (shown_path.py)
        if fallback or not self.RECORD_ON_DISK:
            try:
                self.rd.write_metrics(metrics)
            except Exception as err:  # the directory went away: the record stays in memory
                metrics.errors["coordinator"] = f"coordinator: could not write metrics.json: {err}"
        self.rd.sweep_temporaries()
        with self._lock:
            self._close()
            self.metrics, self.state = metrics, JobState(metrics.state)
            self.reason = metrics.reason or self.reason
        if self._dir_lock is not None:
            self._dir_lock.release()
        self._ended()

    def _ending(self) -> None:
        """The end begins (before the record)."""

    def _record(self) -> Metrics | None:
        raise NotImplementedError

    def _record_failed(self, err: Exception) -> str:
        """`_record` raised: the one-line reason of the fallback record."""
        return self.reason or f"ending the run: {type(err).__name__}: {err}"

    def _fallback_record(self, failure: str) -> Metrics:
        """The record of a job that ended without one of its own: stopped, when it was stopped on
        request and killed for not stopping in time; else failed, with `failure` as the reason."""
        stopped = self._killed_on_stop()
        reason = STOPPED_ON_REQUEST if stopped else failure
        return Metrics(config=self.cfg.to_dict(), state=(JobState.STOPPED if stopped else JobState.FAILED).value,
                       reason=reason, **self._on_disk(), total_s=time.monotonic() - self._t_start,
                       errors={} if stopped else self._failure_errors(reason))

    def _killed_on_stop(self) -> bool:
        return False

    def _steps_trained(self) -> int:
        """The steps known to be done, for the fallback record."""
        return 0

    def _on_disk(self) -> dict[str, Any]:
        """The fallback record's `steps_done`, `resumable_from_step` and `final_steps`: what the directory
        holds (a runtime with checkpoints reads it), else the steps known to be done and nothing to resume."""
        return {"steps_done": self._steps_trained()}

    def _failure_errors(self, reason: str) -> dict[str, str]:
        """Who failed -> what it said, for the fallback record."""
        return {"run": reason}

    def _close(self) -> None:
        """Release the runtime's resources (under the state lock, before the terminal state is set)."""

    def _ended(self) -> None:
        """Called last, once the job has ended."""
