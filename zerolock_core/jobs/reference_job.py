"""The reference runtime as a `Job`: the single-process trainer in a child process of its own (forked
from the engine's preloaded server, `runtime/processes.py`), so that the caller — the CLI's progress
bar, the dashboard's web server — never trains in its own threads and can always stop it.

The job holds the run directory's lock for the child's whole life. A stop request is passed to the
child, which ends at the next step boundary and writes a `stopped` record; a child that does not end
within the grace is killed, and so is one whose parent died. A child that fails leaves a `failed`
record written here (`JobBase`'s fallback), with the last line it printed.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import sys
import time
import traceback
from typing import Any

from ..config.run_config import RunConfig
from ..rundir.metrics import Metrics
from ..rundir.run_dir import RunDir
from .base import JobBase, JobState, JobStatus

STARTING, TRAINING, EVALUATING = 0, 1, 2  # the child's phase, as the shared value holds it
PHASES = (JobState.STARTING, JobState.RUNNING, JobState.FINISHING)  # the job's state in each phase
STOP_GRACE_S = 60.0  # a step (or the final eval) of a large model can take this long


def reference_child(cfg: dict[str, Any], stop, phase, steps, resume: bool = False) -> None:
    """The child's body: train `cfg` (it writes metrics.json; `resume`: from the run's newest checkpoint),
    its errors into the run's stderr.log."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the parent, which stops us
    from ..runtime.processes import die_with_parent

    die_with_parent()
    rd = RunDir(cfg["out"])
    fd = os.open(rd.stderr_log, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if resume else os.O_TRUNC), 0o644)
    os.dup2(fd, 2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)

    def on_step(n: int, _: dict[str, Any]) -> None:
        steps.value = n
        phase.value = TRAINING if n < cfg["train"]["steps"] else EVALUATING

    def should_stop() -> bool:
        if phase.value == STARTING:  # asked before every step: the first ask ends the start-up
            phase.value = TRAINING
        return stop.is_set()

    try:
        from ..train.reference_trainer import train_reference

        phase.value = STARTING
        train_reference(RunConfig.from_dict(cfg), progress=False, locked=True, on_step=on_step,
                        should_stop=should_stop, resume=resume)
    except BaseException as err:
        traceback.print_exc()
        # the last line is the job's reason: the error as a stage's reads (no module path before its name)
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)


class ReferenceJob(JobBase):
    """A reference training run in a child process: start / status / request_stop / stop / wait, like `Run`."""
    THREAD_NAME = "zerolock-reference-job"
    START_ERRORS = (BaseException,)
    # the child writes metrics.json; the job rewrites it with its own clock (`_record`), the one the progress reads
    RECORD_ON_DISK = False
    NO_RECORD = "the reference trainer ended without writing its record"

    def __init__(self, cfg: RunConfig, *, overwrite: bool = False, resume: bool = False,
                 stop_grace_s: float = STOP_GRACE_S) -> None:
        if cfg.train.runtime != "reference" or not cfg.out:
            raise ValueError("ReferenceJob needs a --runtime reference config with an output directory")
        super().__init__(cfg, overwrite=overwrite, resume=resume)
        self.stop_grace_s = stop_grace_s
        self._proc = None
        self._t_running: float | None = None  # when training began, on the job's clock
        self._steps_at_running = 0  # the steps done then (a resumed run's start)
        from ..runtime.processes import context

        ctx = context()
        self._stop, self._phase, self._steps = ctx.Event(), ctx.Value("i", STARTING), ctx.Value("i", 0)

    def _launch(self) -> None:
        self._set_state(JobState.STARTING)
        from ..runtime.processes import start_process

        self._proc = start_process(reference_child,
                                   (self.cfg.to_dict(), self._stop, self._phase, self._steps, self.resume),
                                   name="zerolock-reference")

    def _launch_failed(self, err: BaseException) -> str:
        return f"could not start the reference trainer: {type(err).__name__}: {err}"

    def status(self) -> JobStatus:
        steps = self.metrics.steps_done if self.metrics is not None else self._steps.value
        per_step = eta = None
        trained = steps - self._steps_at_running
        if self._t_running is not None and trained > 0 and self.state == JobState.RUNNING:
            per_step = (time.monotonic() - self._t_running) / trained  # training only, as the pipeline's
            eta = per_step * (self.cfg.train.steps - steps)
        return self._status(steps_done=steps, s_per_step=per_step, eta_s=eta,
                            startup_s=None if self._t_running is None else self._t_running - self._t_start,
                            error=self.reason if self.state == JobState.FAILED else "")

    # ---- the watcher thread ---------------------------------------------------------------------
    def _watch(self) -> None:
        p = self._proc
        try:
            while p.exitcode is None:
                self._set_state(PHASES[self._phase.value])
                if self.state != JobState.STARTING and self._t_running is None:
                    self._t_running, self._steps_at_running = time.monotonic(), self._steps.value
                if self._stop_requested_at is not None:
                    self._stop.set()
                    if time.monotonic() - self._stop_requested_at > self.stop_grace_s:
                        p.kill()
                p.join(0.1)
            failure = None
            if p.exitcode != 0:
                failure = self._last_error() or f"the reference trainer exited with code {p.exitcode}"
            self._end(failure)
        except Exception as err:
            self._end(f"{type(err).__name__}: {err}")

    def _last_error(self) -> str:
        try:
            lines = self.rd.stderr_log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    # ---- the end (JobBase._end) -------------------------------------------------------------------
    def _record(self) -> Metrics | None:
        """The child's record on the job's clock, the one the progress bar reads: its wall time from the job's
        start (the child's own start included), start-up all of it that was neither training nor the eval."""
        m = self.rd.read_metrics()
        if m is None:
            return None
        total = time.monotonic() - self._t_start
        return dataclasses.replace(m, total_s=total, setup_s=max(0.0, total - m.wall_s - m.eval_s))

    def _killed_on_stop(self) -> bool:
        """Killed after the stop grace: a stopped run, though the child wrote no record."""
        code = self._proc.exitcode if self._proc is not None else None
        return self._stop_requested_at is not None and code == -signal.SIGKILL

    def _steps_trained(self) -> int:
        return self._steps.value

    def _on_disk(self) -> dict[str, Any]:
        """A child killed or crashed mid-run: its newest checkpoint is where `--resume` continues."""
        from ..train.reference_checkpoint import resumable_step

        step = resumable_step(self.rd, chunks=self.cfg.train.stages) if self.cfg.train.ckpt_every > 0 else None
        return {**super()._on_disk(), "resumable_from_step": step}

    def _failure_errors(self, reason: str) -> dict[str, str]:
        return {"reference": self._stderr_tail() or reason}

    def _stderr_tail(self) -> str:
        try:
            return "\n".join(self.rd.stderr_log.read_text(errors="replace").splitlines()[-40:])
        except OSError:
            return ""
