"""The reference runtime as a `Job`: the single-process trainer in a child process of its own (forked
from the engine's preloaded server, `runtime/processes.py`), so that the caller — the CLI's progress
bar, the dashboard's web server — never trains in its own threads and can always stop it.

The job holds the run directory's lock for the child's whole life. A stop request is passed to the
child, which ends at the next step boundary and writes a `stopped` record; a child that does not end
within the grace is killed, and so is one whose parent died. A child that fails leaves a `failed`
record written here, with the last line it printed.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from typing import Any

from ..config.run_config import RunConfig
from .job import JobBase
from ..rundir.metrics import Metrics
from ..rundir.run_dir import RunDir, RunLock

STARTING, TRAINING, EVALUATING = 0, 1, 2  # the child's phase, as the shared value holds it
STOP_GRACE_S = 60.0  # a step (or the final eval) of a large model can take this long


def reference_child(cfg: dict[str, Any], stop, phase, steps) -> None:
    """The child's body: train `cfg` (it writes metrics.json), its errors into the run's stderr.log."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the parent, which stops us
    from ..runtime.processes import die_with_parent

    die_with_parent()
    rd = RunDir(cfg["out"])
    fd = os.open(rd.stderr_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)

    def on_step(n: int, _: dict[str, Any]) -> None:
        steps.value = n
        phase.value = TRAINING if n < cfg["train"]["steps"] else EVALUATING

    try:
        from ..train.reference_trainer import train_reference

        phase.value = STARTING
        train_reference(RunConfig.from_dict(cfg), progress=False, locked=True, on_step=on_step,
                        should_stop=stop.is_set)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


class ReferenceJob(JobBase):
    """A reference training run in a child process: start / status / request_stop / stop / wait, like `Run`."""

    def __init__(self, cfg: RunConfig, *, overwrite: bool = False, stop_grace_s: float = STOP_GRACE_S) -> None:
        if cfg.train.runtime != "reference" or not cfg.out:
            raise ValueError("ReferenceJob needs a --runtime reference config with an output directory")
        self.cfg, self.rd = cfg, RunDir(cfg.out)
        self.dir = self.rd.path
        self.overwrite, self.stop_grace_s = overwrite, stop_grace_s
        self.state = "created"
        self.reason = ""
        self.metrics: Metrics | None = None
        self._proc = None
        self._lock: RunLock | None = None
        self._t_start = 0.0
        from ..runtime.processes import context

        ctx = context()
        self._stop, self._phase, self._steps = ctx.Event(), ctx.Value("i", STARTING), ctx.Value("i", 0)

    def start(self) -> "ReferenceJob":
        from ..train.auto_boundaries import resolve_auto_boundaries

        self.cfg, balance = resolve_auto_boundaries(self.cfg)
        self._lock = self.rd.prepare_fresh(self.cfg, overwrite=self.overwrite, balance=balance)
        self._t_start = time.monotonic()
        self.state = "starting"
        try:
            from ..runtime.processes import start_process

            self._proc = start_process(reference_child, (self.cfg.to_dict(), self._stop, self._phase, self._steps),
                                       name="zerolock-reference")
        except BaseException as err:
            self._end(failure=f"could not start the reference trainer: {type(err).__name__}: {err}")
            return self
        self._thread = threading.Thread(target=self._watch, name="zerolock-reference-job", daemon=True)
        self._thread.start()
        return self

    def status(self) -> dict[str, Any]:
        steps = self.metrics.steps_done if self.metrics is not None else self._steps.value
        elapsed = time.monotonic() - self._t_start if self._t_start else 0.0
        return {"state": self.state, "stage_states": [], "stage_steps": [], "steps_done": steps,
                "total_steps": self.cfg.train.steps, "elapsed_s": elapsed, "eta_s": None, "s_per_step": None,
                "dir": str(self.dir), "reason": self.reason, "error": self.reason if self.state == "failed" else "",
                "stopping": self._stop_requested_at is not None and not self.done}

    # ---- the watcher thread ---------------------------------------------------------------------
    def _watch(self) -> None:
        p = self._proc
        try:
            while p.exitcode is None:
                self.state = ("starting", "running", "finishing")[self._phase.value]
                if self._stop_requested_at is not None:
                    self._stop.set()
                    if time.monotonic() - self._stop_requested_at > self.stop_grace_s:
                        p.kill()
                p.join(0.1)
            failure = None
            if p.exitcode != 0:
                failure = self._last_error() or f"the reference trainer exited with code {p.exitcode}"
            self._end(failure=failure)
        except Exception as err:
            self._end(failure=f"{type(err).__name__}: {err}")

    def _last_error(self) -> str:
        try:
            lines = self.rd.stderr_log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def _end(self, *, failure: str | None) -> None:
        metrics = self.rd.read_metrics() if failure is None else None
        if failure is None and metrics is None:
            failure = "the reference trainer ended without writing its record"
        if metrics is None:  # the child failed, or was killed after the stop grace
            code = self._proc.exitcode if self._proc is not None else None
            stopped = self._stop_requested_at is not None and code == -signal.SIGKILL
            reason = "stopped on request" if stopped else failure
            metrics = Metrics(config=self.cfg.to_dict(), state="stopped" if stopped else "failed", reason=reason,
                              steps_done=self._steps.value, total_s=time.monotonic() - self._t_start,
                              errors={} if stopped else {"reference": self._stderr_tail() or reason})
            try:
                self.rd.write_metrics(metrics)
            except OSError as err:
                metrics.errors["coordinator"] = f"could not write metrics.json: {err}"
        self.rd.sweep_temporaries()
        self.metrics, self.reason, self.state = metrics, metrics.reason, metrics.state
        if self._lock is not None:
            self._lock.release()

    def _stderr_tail(self) -> str:
        try:
            return "\n".join(self.rd.stderr_log.read_text(errors="replace").splitlines()[-40:])
        except OSError:
            return ""
