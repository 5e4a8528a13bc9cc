"""`Run`: start, watch and stop a multi-process pipeline run (the pipeline runtime's `Job`).

The coordinator lives in the calling process: it owns the rendezvous store (so a dying stage
cannot take it down), holds the run directory's lock, spawns one process per stage
(`StageSupervisor`) and watches them from a background thread. It is a state machine behind one lock:

    created -> starting -> running <-> recovering -> finishing -> finished | stopped | failed

Its loop runs in try/finally: whatever goes wrong — a stage's error, a crash loop, a pipeline that
stops making progress, an exception in the coordinator itself — ends the run `failed` within
seconds, with the reason in metrics.json, and no process outlives it. What to do about failed
stages is `Recovery`'s (a pure `decide` and its actions). A stop request (`request_stop`, safe
from a signal handler) is recorded at once and acted on at the next tick, whatever the run is doing:
starting, training, recovering or evaluating. No training happens in the caller's threads.
"""
from __future__ import annotations

import atexit
import dataclasses
import time
import traceback
from typing import Any

import torch.distributed as dist

from ..config.run_config import FAILURE_MODES, STRAGGLER, RunConfig
from ..methods import refusal
from ..rundir.metrics import Metrics
from .base import STOPPED_ON_REQUEST, TERMINAL, JobBase, JobState, JobStatus
from ..train.run_setup import prepare as prepare_run
from ..telemetry.compaction import compactable_below
from ..telemetry.events import SEGMENT_STEPS, Cursor, compact_old_segments, read_events
from ..runtime import protocol
from ..runtime.finish import Ending, evaluate_in_child, on_disk, record, resumable_step, write_trace
from ..runtime.processes import start_process
from ..runtime.recovery import Recovery
from ..runtime.recovery_records import RecoveryBook
from ..runtime.stage_process import stage_main
from ..runtime.store_view import StoreView
from ..runtime.supervisor import StageSupervisor

TICK_S = 0.05
COMPACT_EVERY_S = 5.0  # how often the coordinator looks for event segments to compact


class Run(JobBase):
    THREAD_NAME = "zerolock-coordinator"

    def __init__(self, cfg: RunConfig, *, stop_grace_s: float = 10.0, overwrite: bool = False,
                 resume: bool = False) -> None:
        if cfg.train.runtime != "pipeline":
            raise ValueError("Run drives --runtime pipeline runs")
        if not cfg.out:
            raise ValueError("a pipeline run needs an output directory (out)")
        super().__init__(cfg, overwrite=overwrite, resume=resume)
        self.K = cfg.train.stages
        self.stop_grace_s = stop_grace_s
        self._store: StoreView | None = None
        self._sup: StageSupervisor | None = None
        self._recovery: Recovery | None = None
        self._stop_sent = False
        self._t_start_ns = 0
        self._t_running: float | None = None
        self._errors: dict[str, str] = {}
        self._book = RecoveryBook(cfg)
        self._api_injections = 0
        self._resume_step: int | None = None
        self._eval_only: Metrics | None = None  # a resumed run that only lacks its final eval
        self._evaluating = False
        self._compacted_below = 0  # the events of every step below this are compacted
        self._compact_looked = 0.0

    @property
    def recoveries(self) -> list[dict[str, Any]]:
        return self._book.closed

    # ---- control (JobBase.start: the directory, then the launch) ----------------------------------
    def _started(self) -> None:
        self._t_start_ns = time.monotonic_ns()
        _LIVE_RUNS.add(self)

    def _launch(self) -> None:
        """The rendezvous store and the supervisor, then every stage's process."""
        previous = self.rd.read_metrics() if self.resume else None
        if previous is not None and previous.training_complete:
            self._eval_only = previous  # every step is trained: only the final eval is left
            self._set_state(JobState.FINISHING)
            return
        self._store = StoreView(dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False))
        self._sup = StageSupervisor(self.cfg, self._store, run_dir=str(self.dir), target=stage_main)
        self._recovery = Recovery(self.cfg, self._store, self._sup, self._book)
        if self.resume:
            self._resume_step = resumable_step(self.cfg, self.rd)
            self._sup.start_at(self._resume_step)
        self._set_state(JobState.STARTING)
        for s in range(self.K):
            if self._stop_requested_at is not None:
                break  # Ctrl-C while the stages start: start no more of them
            self._sup.spawn(self._sup.launch(s, restore_step=self._resume_step))

    def _launch_failed(self, err: BaseException) -> None:
        """e.g. a process could not be spawned: end cleanly, say why."""
        self._fail(f"coordinator: could not start the run: {type(err).__name__}: {err}", traceback.format_exc())

    def inject_failure(self, stage: int, mode: str = "kill") -> None:
        """Fail a stage now: kill (SIGKILL), stop (SIGSTOP), post-step (die right after its next
        optimizer step) or mid-ckpt (die while writing its next checkpoint); or slow it down from its
        next step on (a straggler, STRAGGLER_FACTOR times slower: nothing to recover)."""
        import os
        import signal

        if mode not in FAILURE_MODES:
            raise ValueError(f"failure mode {mode!r} is not one of {', '.join(FAILURE_MODES)}")
        if not 0 <= stage < self.K:
            raise ValueError(f"stage {stage} is not in 0..{self.K - 1}")
        recovers = mode != STRAGGLER
        if recovers and (refused := refusal(self.cfg.train.method)):  # first: a checkpoint would not help it
            raise ValueError(refused)
        if recovers and self.cfg.train.ckpt_every <= 0:
            raise ValueError("this run writes no checkpoints to recover from")
        with self._lock:
            if not JobState(self.state).live or self._stop_requested_at is not None \
                    or self._sup is None:
                raise ValueError(f"the run is {'stopping' if self._stop_requested_at else self.state}")
            if recovers and self._sup.restarts[stage] >= self.cfg.train.max_restarts:
                raise ValueError(f"stage {stage} has been restarted {self._sup.restarts[stage]} times already "
                                 f"(the most a stage is restarted); another failure would end the run")
            self._api_injections += 1
            label = f"api:{mode}:{self._api_injections}"
            self._book.expect(stage, label)
            if mode in ("kill", "stop"):
                if not self._sup.alive(stage):
                    raise ValueError(f"stage {stage} has no running process right now")
                self._store.set(protocol.injected(stage, label), str(time.monotonic_ns()))
                # It may exit between the check and the signal: then its own exit is the failure.
                self._sup.send_signal(stage, signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
            else:
                self._store.set(protocol.inject_request(stage), f"{mode} {label}")

    # ---- observation ----------------------------------------------------------------------------
    def _get(self, key: str, default: Any, cast: Any) -> Any:
        return default if self._store is None else self._store.get(key, default, cast)

    def status(self) -> JobStatus:
        steps = [self._get(protocol.stage_step(s), 0, int) for s in range(self.K)]
        states = [self._get(protocol.stage_state(s), "starting", str) for s in range(self.K)]
        if self.metrics is not None:  # the run's own record
            steps = [self.metrics.steps_done] * self.K
        elif self._eval_only is not None:
            steps = [self._eval_only.steps_done] * self.K
        done = min(steps) if steps else 0
        trained = done - (self._resume_step or 0)  # the steps this process trained (a resumed run began later)
        eta = per_step = None
        downtime = self._book.downtime_s()
        if self._t_running is not None and trained > 0 and self.state in (JobState.RUNNING, JobState.RECOVERING):
            # seconds per step of training only: start-up and outages are left out
            per_step = max(0.0, time.monotonic() - self._t_running - downtime) / trained
            eta = per_step * (self.cfg.train.steps - done)
        return self._status(
            stage_states=states, stage_steps=steps, steps_done=done, eta_s=eta, s_per_step=per_step,
            startup_s=(self._t_running - self._t_start) if self._t_running is not None else None,
            downtime_s=downtime, recoveries=list(self.recoveries), recovering=self._book.open_stages(),
            open_recoveries=self._book.open_records(), stragglers=self._book.stragglers(self._get),
            eval_progress=self._eval_progress())

    def _eval_progress(self) -> dict[str, Any] | None:
        if self.state != JobState.FINISHING or not self._evaluating:
            return None
        from ..rundir.atomic_files import read_json

        return read_json(self.rd.eval_progress) or {"phase": "starting", "scored": 0, "total": None}

    def events(self, cursor: Cursor | None = None) -> tuple[list[dict[str, Any]], Cursor]:
        """Events written since `cursor`, and the cursor to ask from next time (None: from the start)."""
        return read_events(self.rd.event_files(), cursor=cursor)

    @property
    def standby_ready(self) -> bool:
        return self._sup is not None and self._sup.standby.ready

    @property
    def wants_standby(self) -> bool:
        import os

        mode = self.cfg.train.warm_standby
        return mode == "on" or (mode == "auto" and (os.cpu_count() or 1) > self.K)

    # ---- state ----------------------------------------------------------------------------------
    def _fail(self, reason: str, detail: str = "") -> None:
        """Record the first reason the run fails (later ones are consequences)."""
        with self._lock:
            if not self.reason or self.reason == STOPPED_ON_REQUEST:  # a failure outranks a stop
                self.reason = reason
            self._errors.setdefault("coordinator" if reason.startswith("coordinator") else "run",
                                    f"{reason}\n{detail}".strip())
            self.request_stop()
            self._send_stop(reason)

    def _send_stop(self, why: str) -> None:
        """Tell every stage to stop (once): they finish their current action, save and exit."""
        if self._stop_sent or self._store is None:
            return
        self._stop_sent = True
        try:
            self._store.set(protocol.STOP, why)
        except Exception:
            pass
        if self._sup is not None:
            self._sup.wake_all()

    # ---- the coordinator thread -----------------------------------------------------------------
    def _watch(self) -> None:
        try:
            while not self._tick():
                time.sleep(TICK_S)
        except Exception as err:
            self._fail(f"coordinator: {type(err).__name__}: {err}", traceback.format_exc())
        finally:
            self._end()

    def _tick(self) -> bool:
        """One look at everything; True once every stage process has exited (or there are none)."""
        if self._sup is None:
            return True  # nothing to watch: only the final eval is left
        with self._lock:
            now = time.monotonic()
            states = [self._get(protocol.stage_state(s), "", str) for s in range(self.K)]
            stopping = self._stop_requested_at is not None
            if stopping:
                if not self.reason:
                    self.reason = STOPPED_ON_REQUEST
                self._send_stop(self.reason)
                # a stage still starting has nothing to save: it need not finish loading first
                self._sup.kill([s for s in range(self.K) if states[s] in protocol.STARTING_STATES
                                or self._sup.procs[s] is None])
            if self.state == JobState.STARTING and all(x in ("running", "done") for x in states):
                self._set_state(JobState.RUNNING)
                self._t_running = now
            if not stopping and self.state == JobState.RUNNING and self.cfg.train.ckpt_every > 0 \
                    and self.wants_standby \
                    and not self._book.open_stages():
                # only once every stage runs: its imports must not slow their start (and the run's encoded data
                # is in its directory by then, for the standby to read ahead)
                self._sup.standby.start(prepare=(prepare_run, (self.cfg.to_dict(),)))
            if not stopping and self.state == JobState.RUNNING and not self._book.open_stages():
                self._compact_events(now)
            if any(p is None for p in self._sup.procs):  # a stop arrived while the stages were being started
                return all(p is None or p.exitcode is not None for p in self._sup.procs)
            # first close what has finished recovering: a stage that fails again right after catching up
            # must not have its completed recovery recorded as interrupted
            self._book.close_ready(self._get, gens=self._sup.gens)
            failed = self._sup.failed_stages(now, states, injected=lambda s: self._book.fired_on(
                s, self._store.raw) is not None)
            if failed and not stopping:
                self._set_state(JobState.RECOVERING)
                ended = self._recovery.handle(failed, states)
                if ended is not None:
                    reason, errors = ended
                    self._errors.update(errors)
                    self._fail(reason)
                    self._sup.kill_all()
                return False
            if self.state == JobState.RECOVERING and not self._book.open_stages():
                self._set_state(JobState.RUNNING)
            if self.cfg.train.ckpt_every > 0 and not stopping and \
                    all(self._get(protocol.actions_done(s), "", str) for s in range(self.K)):
                self._store.set(protocol.COMPLETE, "1")
            if self._sup.all_exited():
                return True
            if not stopping:
                stalled = self._sup.stalled(now, states, recovering=bool(self._book.open_stages()))
                if stalled:
                    self._fail(stalled)
                    self._sup.kill_all()
            elif now - self._stop_requested_at > self.stop_grace_s:
                self._sup.kill_all()
            return False

    def _compact_events(self, now: float) -> None:
        """Compact the event segments no stage can write again (telemetry/compaction.py): every stage is far
        past them and every stage's newest checkpoint (what a rollback or a resume restores) is after them."""
        if now - self._compact_looked < COMPACT_EVERY_S:
            return
        self._compact_looked = now
        resumable = None
        if self.cfg.train.ckpt_every > 0:
            cursors = [self._get(protocol.checkpoint_cursor(s), -1, int) for s in range(self.K)]
            resumable = max(-1, min(cursors)) // self.cfg.train.microbatches
        below = compactable_below(self._known_steps(), resumable=resumable)
        if below >= self._compacted_below + SEGMENT_STEPS:
            compact_old_segments(self.rd.event_files(), below_step=below)
            self._compacted_below = below

    # ---- the end (JobBase._end: no process left, the record written, the lock released) -----------
    def _ending(self) -> None:
        with self._lock:
            if self.state not in (JobState.FINISHING, *TERMINAL):
                self._set_state(JobState.FINISHING)

    def _record(self) -> Metrics:
        self._end_processes()
        return self._finish()

    def _record_failed(self, err: Exception) -> str:
        self.reason = self.reason or f"coordinator: ending the run: {type(err).__name__}: {err}"
        self._errors["coordinator"] = traceback.format_exc()
        return self.reason

    def _failure_errors(self, reason: str) -> dict[str, str]:
        return dict(self._errors)

    def _on_disk(self) -> dict[str, Any]:
        """The record could not be made (e.g. a full disk): what the directory holds all the same."""
        try:
            return on_disk(self.cfg, self.rd, known_steps=self._known_steps(), finished=False).fields()
        except Exception:  # the directory cannot be read either: nothing can be said of it
            return {"steps_done": 0}

    def _known_steps(self) -> list[int]:
        """Each stage's step as the store last said (a rollback or a resume sets the step it restores)."""
        return [self._get(protocol.stage_step(s), 0, int) for s in range(self.K)]

    def _close(self) -> None:
        if self._sup is not None:
            self._sup.standby.drop()
        if self._store is not None:
            self._store.close()

    def _ended(self) -> None:
        _LIVE_RUNS.discard(self)

    def _end_processes(self) -> None:
        if self._sup is None:
            return
        try:
            self._sup.kill_all()
        except Exception as err:
            self._errors.setdefault("coordinator", f"coordinator: ending the stage processes: {err}")
        for s in range(self.K):  # a stage's own error record, read before the store goes
            err = self._get(protocol.stage_error(s), "", str)
            if err and self._get(protocol.stage_state(s), "", str) == "error":
                self._errors.setdefault(str(s), err)

    def _finish(self) -> Metrics:
        """The state, the final eval (unless stopped), the trace and the record."""
        complete = self._training_complete()
        stopped = self.reason == STOPPED_ON_REQUEST
        state = JobState.FAILED if self._errors else (
            JobState.FINISHED if complete else JobState.STOPPED if stopped else JobState.FAILED)
        if state == JobState.FAILED and not self._errors:
            states = [self._get(protocol.stage_state(s), "", str) for s in range(self.K)]
            self.reason = self.reason or f"the stages ended without finishing ({', '.join(states)})"
            self._errors["run"] = self.reason
        eval_, skipped, eval_s = None, "", 0.0
        if state == JobState.FINISHED and self._stop_requested_at is not None:
            state, self.reason = JobState.STOPPED, STOPPED_ON_REQUEST
            skipped = "stopped before the final eval: every step is trained; `--resume` evaluates it"
        elif state == JobState.FINISHED and not self.cfg.train.final_eval:
            skipped = "not evaluated (final_eval is off)"
        elif state == JobState.FINISHED:
            t_eval = time.monotonic()
            self._evaluating = True
            eval_, skipped, failed = evaluate_in_child(self.cfg, self.rd, start=self._start_eval,
                                                       stopping=lambda: self._stop_requested_at is not None)
            self._evaluating = False
            eval_s = time.monotonic() - t_eval
            if failed:
                state, self.reason = JobState.FAILED, skipped
                self._errors["eval"] = skipped
            elif eval_ is None:
                state, self.reason = JobState.STOPPED, STOPPED_ON_REQUEST
        elif state == JobState.STOPPED:
            skipped = self._stopped_note()
        if self._eval_only is not None:  # a resumed run that only lacked its eval keeps its training record
            return dataclasses.replace(self._eval_only, state=str(state),
                                       reason=self.reason if state != JobState.FINISHED else "",
                                       eval=eval_, eval_skipped=skipped, eval_s=eval_s,
                                       total_s=self._eval_only.total_s + time.monotonic() - self._t_start,
                                       errors={**self._eval_only.errors, **self._errors},
                                       resumable_from_step=None if state == JobState.FINISHED else self.cfg.train.steps)
        try:
            write_trace(self.rd, self.K)
        except Exception as err:
            self._errors.setdefault("coordinator", f"coordinator: writing the trace: {type(err).__name__}: {err}")
            state = JobState.FAILED
            self.reason = self.reason if self.reason and self.reason != STOPPED_ON_REQUEST else \
                f"coordinator: writing the trace failed: {err}"
        return record(self.cfg, self.rd, Ending(
            state=str(state), reason=self.reason, errors=self._errors, eval=eval_, eval_skipped=skipped,
            since_ns=self._t_start_ns, start_step=self._resume_step or 0,
            known_steps=self._known_steps(),
            setup_s=(self._t_running - self._t_start) if self._t_running else 0.0,
            total_s=time.monotonic() - self._t_start, eval_s=eval_s, downtime_s=self._book.downtime_s(),
            recovery=self._book.close_all_open("the run was stopped during the recovery")
            if state != JobState.FINISHED else list(self.recoveries),
            restarts=list(self._sup.restarts) if self._sup else [0] * self.K,
            failures_not_injected=self._book.not_injected(self._get, state),
            stragglers=self._book.stragglers(self._get),
            resumed_from_step=self._resume_step))

    def _training_complete(self) -> bool:
        if self._eval_only is not None:
            return True
        from ..rundir.artifacts import final_weight_steps

        per_stage = [self._get(protocol.stage_state(s), "", str) for s in range(self.K)]
        return all(x == "done" for x in per_stage) and \
            min(final_weight_steps(self.dir, self.K) or [0]) >= self.cfg.train.steps

    def _start_eval(self, target, args):
        """The final eval's process: a standby no stage needed (its imports are done), or a fresh one."""
        p = None
        if self._sup is not None:
            p, _ = self._sup.standby.take(target, args)
        return p if p is not None else start_process(target, args, name="zerolock-eval")

    def _stopped_note(self) -> str:
        from ..rundir.artifacts import final_weight_steps

        steps = final_weight_steps(self.dir, self.K)
        if steps and len(set(steps)) > 1:
            return (f"stopped with the stages at different steps ({steps}): final/ mixes them, so it is not "
                    f"evaluated; `--resume` trains every stage to the last step")
        return "stopped before the last step: not evaluated"


_LIVE_RUNS: set[Run] = set()


@atexit.register
def _stop_live_runs() -> None:
    """Closing the program stops its runs' processes."""
    for run in list(_LIVE_RUNS):
        run.stop(timeout=15)
