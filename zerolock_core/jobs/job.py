"""A training job: one interface over the engine's runtimes, and the one place that picks a runtime.

    job = make_job(cfg, overwrite=False, resume=False).start()
    job.status()          # state, steps, what it waits for
    job.request_stop()    # safe from a signal handler; job.stop() also waits
    metrics = job.wait()  # the run's `Metrics` once it has ended

`Run` (pipeline_job.py) is the pipeline runtime's job, `ReferenceJob` (reference_job.py) the
reference trainer's; both are `JobBase`s (base.py: the lifecycle, `JobState`, `JobStatus`), which
import neither this module nor each other. Both hold the run directory's lock while they run and end
with a record in metrics.json, however they end. The CLI, the dashboard and the benchmarks all go through
`make_job`; `run_to_end` is the CLI's way to drive one (a progress bar; Ctrl-C and SIGTERM stop the
run, never lost — see stop_signals.py).
"""
from __future__ import annotations

import sys
import threading
from typing import Protocol

from ..method.balance import is_auto
from ..config.run_config import RunConfig
from ..rundir.eval_progress import evaluating_words
from ..rundir.metrics import Metrics
from ..rundir.run_dir import RunDir
from .base import JobState, JobStatus
from .pipeline_job import Run
from .reference_job import ReferenceJob
from .stop_signals import StopSignals

POLL_S = 0.2
STOPPING = "stopping: every stage finishes its current action and saves ..."
STILL_STOPPING = "still stopping (the run ends with its record; stages that do not stop are killed)"


class Job(Protocol):
    cfg: RunConfig
    state: JobState
    metrics: Metrics | None

    def start(self) -> "Job": ...
    def status(self) -> JobStatus: ...
    def request_stop(self) -> None: ...
    def stop(self, *, wait: bool = True, timeout: float | None = 60.0) -> Metrics | None: ...
    def wait(self, timeout: float | None = None) -> Metrics | None: ...

    @property
    def done(self) -> bool: ...


class JobFailed(RuntimeError):
    """The run ended failed; the message is its reason (one line) and where the details are."""


def make_job(cfg: RunConfig, *, overwrite: bool = False, resume: bool = False) -> Job:
    """The job for `cfg`'s runtime (not started)."""
    if cfg.train.runtime == "reference":
        return ReferenceJob(cfg, overwrite=overwrite, resume=resume)
    return Run(cfg, overwrite=overwrite, resume=resume)


def run_to_end(job: Job, *, progress: bool = True, signals: StopSignals | None = None,
               before_s: float = 0.0) -> Metrics:
    """Start `job` and wait for its end with a progress bar. SIGINT and SIGTERM (in the main thread) ask it
    to stop — from the first instant, its start included — and it still ends with its record. `signals`:
    handlers the caller installed earlier (the CLI does, before its imports), else installed here.
    `before_s`: the caller's seconds before the job (the CLI's imports and checks), counted in the elapsed
    time the bar shows, as its summary counts them. Raises ConfigError (nothing was started) like `job.start()`."""
    from tqdm import tqdm

    cfg = job.cfg
    bar = tqdm(total=cfg.train.steps, disable=not progress, unit="step",
               desc=f"{cfg.train.method} {cfg.train.runtime} K={cfg.train.stages}", dynamic_ncols=True,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{postfix}")
    own = signals is None and threading.current_thread() is threading.main_thread()
    signals = signals or StopSignals()
    signals.on_stop = job.request_stop
    said = 0
    try:
        if own:
            signals.__enter__()
        if signals.requested:
            job.request_stop()  # a request that came before the job existed: it stops as it starts
        if is_auto(cfg.model.boundaries) and not getattr(job, "resume", False):
            bar.set_postfix_str("measuring each layer's cost for --boundaries auto", refresh=True)
        job.start()
        while not job.done:
            if signals.received > said:  # say it here, not in the handler (it may interrupt a print)
                if said == 0:
                    bar.write(STOPPING, file=sys.stderr)
                if signals.received > 1:
                    bar.write(STILL_STOPPING, file=sys.stderr)
                said = signals.received
            st = job.status()
            bar.n = st.steps_done
            bar.set_postfix_str(progress_words(st, before_s=before_s))
            bar.refresh()
            job.wait(POLL_S)
    finally:
        if own:
            signals.__exit__(None, None, None)
        signals.on_stop = lambda: None
        bar.close()
    if signals.received and not said:  # the run ended before the loop looked again: say it all the same
        print(STOPPING, file=sys.stderr)
    metrics = job.wait()
    if metrics is None:
        raise JobFailed("the run ended without a record")
    return metrics


def train(cfg: RunConfig, *, progress: bool = True, overwrite: bool = False, resume: bool = False) -> Metrics:
    """Run `cfg` to its end (the benchmarks' and tests' one call). Returns the record of a finished or
    stopped run; raises JobFailed for a failed one."""
    metrics = run_to_end(make_job(cfg, overwrite=overwrite, resume=resume), progress=progress)
    if metrics.state == JobState.FAILED:
        raise JobFailed(f"{cfg.train.runtime} run failed: {metrics.reason or 'unknown error'} "
                        f"(details: {RunDir(cfg.out).metrics})")
    return metrics


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m:02d}:{s:02d}" if m < 60 else f"{m // 60}:{m % 60:02d}:{s:02d}"


def progress_words(st: JobStatus, *, before_s: float = 0.0) -> str:
    """One line for a job's status (the CLI's progress bar; the dashboard's status line reads the same
    fields, `app/watch_view.state_words`). A pure function of the status. The clocks are the record's
    (metrics.py): elapsed = the wall time so far (`before_s`, the caller's time before the job, included),
    starting = the start-up so far, ETA = seconds per training step so far x the steps left."""
    elapsed = _clock(before_s + (st.elapsed_s or 0.0))
    if st.stopping:
        return f"stopping: every stage finishes its current action and saves; elapsed {elapsed}"
    if st.state == JobState.STARTING:
        phases = ", ".join(f"{s}: {p}" for s, p in enumerate(st.stage_states))
        return f"starting {_clock(st.elapsed_s or 0.0)}" + (f" ({phases})" if phases else "") \
            + (f"; elapsed {elapsed}" if before_s else "")
    if st.open_recoveries:
        down = "; ".join(f"stage {r['stage']} down — {'rolling every stage back' if r['kind'] == 'global' else 'restarting'}"
                         f" ({r['down_s']:.1f} s)" for r in st.open_recoveries)
        return f"{down}; elapsed {elapsed}"
    if st.state == JobState.FINISHING:
        return f"{evaluating_words(st.eval_progress, sep='/')}; elapsed {elapsed}"
    if st.s_per_step is not None:
        return f"{st.state}, {st.s_per_step:.2f} s/step, ETA {_clock(st.eta_s)}, elapsed {elapsed}"
    return f"{st.state}, elapsed {elapsed}"
