"""`Run`: start, watch and stop a multi-process pipeline run (the CLI and the dashboard use it).

The coordinator lives in the calling process: it owns the rendezvous store (so a dying stage
cannot take it down), spawns one process per stage, and watches them from a background thread.
It is a state machine behind one lock:

    created -> starting -> running <-> recovering -> finishing -> finished | stopped | failed

Its loop runs in try/finally: whatever goes wrong — a stage's error, a crash loop, a pipeline that
stops making progress, an exception in the coordinator itself — ends the run `failed` within
seconds, with the reason in metrics.json, and no process outlives it. What to do about a failed
stage is decided by `recovery_policy.decide`, a pure function of what the coordinator observed.
No training happens in the caller's threads.
"""
from __future__ import annotations

import atexit
import dataclasses
import json
import os
import signal
import threading
import time
import traceback
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import torch.distributed as dist

from ..artifacts import write_json_atomic
from ..config import FAILURE_MODES, PIPEDREAM_REFUSAL, RunConfig
from ..telemetry import read_events
from . import protocol, run_dir
from .checkpoint import CheckpointStore
from .final_eval import evaluate_run
from .processes import start_process
from .recovery_policy import Decision, Observed, StageView, common_step, decide
from .recovery_records import RecoveryBook
from .report import final_weight_steps, pipeline_metrics, write_trace
from .stage_process import StageLaunch, stage_main
from .standby import Standby

TERMINAL = ("finished", "stopped", "failed")
TRANSITIONS = {
    "created": {"starting", "finishing"},  # finishing: the start itself failed
    "starting": {"running", "recovering", "finishing", "failed"},
    "running": {"recovering", "finishing", "failed"},
    "recovering": {"running", "recovering", "finishing", "failed"},
    "finishing": set(TERMINAL),
}
TICK_S = 0.05
STARTUP_TIMEOUT_S = 600.0  # a stage process still loading after this long has hung
MIN_STALL_S = 60.0  # the automatic stall timeout is at least this, and 10x the slowest step seen
EVAL_TIMEOUT_S = 900.0


class Run:
    def __init__(self, cfg: RunConfig, *, stop_grace_s: float = 10.0, overwrite: bool = False,
                 resume: bool = False) -> None:
        if cfg.train.runtime != "pipeline":
            raise ValueError("Run drives --runtime pipeline runs")
        if not cfg.out:
            raise ValueError("a pipeline run needs an output directory (out)")
        self.cfg, self.dir = cfg, Path(cfg.out)
        self.K = cfg.train.stages
        self.stop_grace_s = stop_grace_s
        self.overwrite, self.resume = overwrite, resume
        self.state = "created"
        self.reason = ""  # why the run failed (or was stopped), one line
        self.metrics: dict[str, Any] | None = None
        self._procs: list[BaseProcess | None] = [None] * self.K
        self._gens = [0] * self.K
        self._restarts = [0] * self.K
        self._link_gens = [0] * max(0, self.K - 1)
        self._store: dist.TCPStore | None = None
        self._stop_requested_at: float | None = None
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._t_start = 0.0
        self._t_start_ns = 0
        self._t_running: float | None = None
        self._hb: list[tuple[int, float]] = [(0, 0.0)] * self.K
        self._spawned_at = [0.0] * self.K
        self._errors: dict[str, str] = {}
        self._book = RecoveryBook(cfg)
        self._api_injections = 0
        self._last_read: dict[str, Any] = {}  # store values as last seen: status() after the store is gone
        self._standby = Standby()
        self._progress_sig: tuple | None = None
        self._last_progress = 0.0
        self._step_seen: list[tuple[int, float]] = [(0, 0.0)] * self.K
        self._slowest_step_s = 0.0
        self._resume_step: int | None = None
        self._eval_proc: BaseProcess | None = None

    @property
    def recoveries(self) -> list[dict[str, Any]]:
        return self._book.closed

    # ---- control --------------------------------------------------------------------------
    def start(self) -> "Run":
        """Validate the directory, then spawn every stage. A failure after validation ends the run
        `failed` (metrics.json says why) instead of raising; a bad directory raises ConfigError
        before anything is touched."""
        if self.state != "created":
            raise RuntimeError(f"run already {self.state}")
        if self.resume:
            run_dir.check_resumable(self.dir, self.cfg)
        else:
            run_dir.prepare_fresh(self.dir, self.cfg, overwrite=self.overwrite)
        self._t_start, self._t_start_ns = time.monotonic(), time.monotonic_ns()
        self._last_progress = self._t_start
        _LIVE_RUNS.add(self)
        try:
            write_json_atomic(self.dir / run_dir.CONFIG, self.cfg.to_dict())
            self._store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
            self._set_state("starting")
            if self.resume:
                self._resume_step = common_step([CheckpointStore(self.dir / "checkpoints", stage=s).verified_steps()
                                                 for s in range(self.K)])
            for s in range(self.K):
                self._spawn(self._launch(s, restore_step=self._resume_step))
        except Exception as err:  # e.g. a process could not be spawned: end cleanly, say why
            self._fail(f"coordinator: could not start the run: {type(err).__name__}: {err}", traceback.format_exc())
            self._end()
            return self
        self._thread = threading.Thread(target=self._watch, name="zerolock-coordinator", daemon=True)
        self._thread.start()
        return self

    def stop(self, *, wait: bool = True, timeout: float | None = 60.0) -> dict[str, Any] | None:
        """Ask every stage to stop; they finish their current action, save and exit."""
        with self._lock:
            if self._store is not None and self._stop_requested_at is None and self.state not in TERMINAL:
                self._stop_requested_at = time.monotonic()
                self.reason = self.reason or "stopped on request"
                self._store.set(protocol.STOP, "1")
                for p in self._procs:  # a stopped (SIGSTOP) stage must run to notice
                    if p is not None and p.pid and p.is_alive():
                        os.kill(p.pid, signal.SIGCONT)
            if self._eval_proc is not None and self._eval_proc.is_alive():
                self._eval_proc.kill()  # stop during the final eval: skip it
        return self.wait(timeout) if wait else None

    def wait(self, timeout: float | None = None) -> dict[str, Any] | None:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.metrics

    def inject_failure(self, stage: int, mode: str = "kill") -> None:
        """Fail a stage now: kill (SIGKILL), stop (SIGSTOP), post-step (die right after its next
        optimizer step) or mid-ckpt (die while writing its next checkpoint)."""
        if mode not in FAILURE_MODES:
            raise ValueError(f"failure mode {mode!r} is not one of {', '.join(FAILURE_MODES)}")
        if not 0 <= stage < self.K:
            raise ValueError(f"stage {stage} is not in 0..{self.K - 1}")
        if self.cfg.train.ckpt_every <= 0:
            raise ValueError("this run has no checkpoints to recover from (start it with ckpt_every > 0)")
        if self.cfg.train.method == "pipedream":
            raise ValueError(PIPEDREAM_REFUSAL)
        with self._lock:
            if self.state not in ("starting", "running", "recovering") or self._stop_requested_at is not None:
                raise ValueError(f"the run is {'stopping' if self._stop_requested_at else self.state}")
            if self._restarts[stage] >= self.cfg.train.max_restarts:
                raise ValueError(f"stage {stage} has been restarted {self._restarts[stage]} times already "
                                 f"(the limit, max_restarts); another failure would end the run")
            self._api_injections += 1
            label = f"api:{mode}:{self._api_injections}"
            self._book.expect(stage, label)
            if mode in ("kill", "stop"):
                p = self._procs[stage]
                if p is None or not p.is_alive():
                    raise ValueError(f"stage {stage} has no running process right now")
                self._store.set(protocol.injected(stage, label), str(time.monotonic_ns()))
                os.kill(p.pid, signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
            else:
                self._store.set(protocol.inject_request(stage), f"{mode} {label}")

    # ---- observation ----------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        steps = [self._get(protocol.stage_step(s), 0, int) for s in range(self.K)]
        states = [self._get(protocol.stage_state(s), "starting", str) for s in range(self.K)]
        per_stage = (self.metrics or {}).get("per_stage") or []
        if len(per_stage) == self.K:  # the stages' own final reports
            steps = [p["steps_done"] for p in per_stage]
        elapsed = time.monotonic() - self._t_start if self._t_start else 0.0
        done = min(steps) if steps else 0
        eta = per_step = None
        downtime = self._book.downtime_s()
        if self._t_running is not None and done > 0 and self.state in ("running", "recovering"):
            # seconds per step of training only: start-up and outages are left out
            per_step = max(0.0, time.monotonic() - self._t_running - downtime) / done
            eta = per_step * (self.cfg.train.steps - done)
        return {"state": self.state, "stage_states": states, "stage_steps": steps, "steps_done": done,
                "total_steps": self.cfg.train.steps, "elapsed_s": elapsed, "eta_s": eta, "s_per_step": per_step,
                "startup_s": (self._t_running - self._t_start) if self._t_running is not None else None,
                "downtime_s": downtime, "dir": str(self.dir), "recoveries": list(self.recoveries),
                "recovering": self._book.open_stages(), "open_recoveries": self._book.open_records(),
                "eval_progress": self._eval_progress(), "reason": self.reason}

    def _eval_progress(self) -> dict[str, Any] | None:
        if self.state != "finishing" or self._eval_proc is None:
            return None
        try:
            return json.loads((self.dir / run_dir.EVAL_PROGRESS).read_text())
        except (OSError, ValueError):  # not written yet (the process is importing)
            return {"phase": "starting", "scored": 0, "total": None}

    def events(self, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Events written since byte `offset`, and the offset to ask from next time."""
        return read_events(self.dir / "events.jsonl", offset=offset)

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    @property
    def standby_ready(self) -> bool:
        return self._standby.ready

    @property
    def wants_standby(self) -> bool:
        mode = self.cfg.train.warm_standby
        return mode == "on" or (mode == "auto" and (os.cpu_count() or 1) > self.K)

    # ---- state ----------------------------------------------------------------------------
    def _set_state(self, new: str) -> None:
        with self._lock:
            if new == self.state:
                return
            assert new in TRANSITIONS.get(self.state, ()), f"run state {self.state} -> {new}"
            self.state = new

    def _fail(self, reason: str, detail: str = "") -> None:
        """Record the first reason the run fails (later ones are consequences)."""
        with self._lock:
            if not self.reason or self.reason == "stopped on request":  # a failure outranks a stop
                self.reason = reason
            self._errors.setdefault("coordinator" if reason.startswith("coordinator") else "run",
                                    f"{reason}\n{detail}".strip())
            self._stop_requested_at = self._stop_requested_at or time.monotonic()
            if self._store is not None:
                try:
                    self._store.set(protocol.STOP, reason)
                except Exception:
                    pass

    # ---- processes ------------------------------------------------------------------------
    def _launch(self, stage: int, **kw) -> StageLaunch:
        return StageLaunch(stage=stage, host="127.0.0.1", port=self._store.port, run_dir=str(self.dir), **kw)

    def _spawn(self, launch: StageLaunch) -> str | None:
        """Start the stage's process, from the standby if there is one: "ready" / "warming" (it was
        still importing) / None (a fresh process)."""
        self._store.set(protocol.stage_state(launch.stage), protocol.STARTING_STATES[0])
        launch = dataclasses.replace(launch, spawned_ns=time.monotonic_ns())
        args = (self.cfg.to_dict(), launch)
        p, warm = self._standby.take(stage_main, args)
        if p is None:
            p = start_process(stage_main, args, name=f"zerolock-stage{launch.stage}-gen{launch.generation}")
        self._procs[launch.stage] = p
        self._gens[launch.stage] = launch.generation
        self._hb[launch.stage] = (0, time.monotonic())
        self._spawned_at[launch.stage] = time.monotonic()
        return warm

    def _kill(self, stages) -> None:
        for s in stages:
            p = self._procs[s]
            if p is not None and p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
        for s in stages:
            p = self._procs[s]
            if p is not None:
                p.join(10)

    def _get(self, key: str, default, cast):
        store = self._store
        if store is None or self.state in TERMINAL:  # the store went away with the run: what we saw last
            return self._last_read.get(key, default)
        try:
            if not store.check([key]):
                return default  # absent now (some keys are deleted once handled): not what it was
            value = self._last_read[key] = cast(store.get(key).decode())
            return value
        except Exception:
            return default

    # ---- the coordinator thread -----------------------------------------------------------
    def _watch(self) -> None:
        try:
            while not self._tick():
                time.sleep(TICK_S)
        except Exception as err:
            self._fail(f"coordinator: {type(err).__name__}: {err}", traceback.format_exc())
        finally:
            self._end()

    def _tick(self) -> bool:
        """One look at everything; True once every stage process has exited."""
        with self._lock:
            now = time.monotonic()
            states = [self._get(protocol.stage_state(s), "", str) for s in range(self.K)]
            if self.state == "starting" and all(x in ("running", "done") for x in states):
                self._set_state("running")
                self._t_running = now
            stopping = self._stop_requested_at is not None
            if not stopping and self.state == "running" and self.cfg.train.ckpt_every > 0 and self.wants_standby \
                    and not self._book.open_stages():
                self._standby.start()  # only once every stage runs: its imports must not slow their start
            failed = self._failed_stages(now, states)
            if failed and not stopping:
                self._handle_failures(failed, states)
                return False
            self._close_recoveries()
            if self.cfg.train.ckpt_every > 0 and not stopping and \
                    all(self._get(protocol.actions_done(s), "", str) for s in range(self.K)):
                self._store.set(protocol.COMPLETE, "1")
            if all(p is not None and p.exitcode is not None for p in self._procs):
                return True
            if not stopping:
                self._check_progress(now, states)
            elif now - self._stop_requested_at > self.stop_grace_s:
                self._kill(range(self.K))
            return False

    def _failed_stages(self, now: float, states: list[str]) -> list[StageView]:
        timeout = self.cfg.train.heartbeat_timeout_s
        failed = []
        for s, p in enumerate(self._procs):
            code = p.exitcode
            why = None
            if states[s] in ("done", "stopped"):
                continue  # its work is on disk and reported: how the interpreter then exits changes nothing
            if code not in (None, 0):
                why = f"exited with code {code}"
            elif code is None and self._stale(s, now, timeout, states[s]):
                why = f"sent no heartbeat for {timeout:g} s"
            elif code is None and states[s] in protocol.STARTING_STATES and \
                    now - self._spawned_at[s] > STARTUP_TIMEOUT_S:
                why = f"was still starting after {STARTUP_TIMEOUT_S:g} s"
            if why is not None:
                injected = self._book.fired_on(s, self._store) is not None
                failed.append(StageView(stage=s, failed=True, why=why,
                                        error=self._get(protocol.stage_error(s), "", str),
                                        reached_running=injected or states[s] in ("running", "link-lost", "done"),
                                        link_lost=states[s] == "link-lost", restarts=self._restarts[s]))
        return failed

    def _stale(self, stage: int, now: float, timeout: float, state: str) -> bool:
        """Silent for `timeout` while running its actions."""
        beats = self._get(protocol.heartbeat(stage, self._gens[stage]), 0, int)
        last, since = self._hb[stage]
        if beats != last or state != "running":
            # loading (imports can hold the GIL for seconds) is watched by the startup timeout
            self._hb[stage] = (beats, now)
            return False
        return now - since > timeout

    def _check_progress(self, now: float, states: list[str]) -> None:
        """No action anywhere for the stall timeout, while every stage runs: the pipeline is stuck."""
        sig = tuple(self._get(protocol.progress(s, self._gens[s]), 0, int) for s in range(self.K)) + tuple(states)
        if sig != self._progress_sig or any(x not in ("running", "done") for x in states):
            self._progress_sig, self._last_progress = sig, now
        for s in range(self.K):
            step = self._get(protocol.stage_step(s), 0, int)
            last, at = self._step_seen[s]
            if step == last + 1 and at > 0 and not self._book.open_stages():
                self._slowest_step_s = max(self._slowest_step_s, now - at)
            if step != last:
                self._step_seen[s] = (step, now)
        limit = self.cfg.train.stall_timeout_s or max(MIN_STALL_S, 10 * self._slowest_step_s)
        if now - self._last_progress > limit:
            where = ", ".join(f"stage {s} {states[s]} at step {self._get(protocol.stage_step(s), 0, int)}"
                              for s in range(self.K))
            self._fail(f"the pipeline stalled: no stage ran an action for {now - self._last_progress:.0f} s "
                       f"(limit {limit:.0f} s; {where})")
            self._kill(range(self.K))

    # ---- recovery -------------------------------------------------------------------------
    def _observe(self, failed: list[StageView], states: list[str]) -> Observed:
        by_stage = {v.stage: v for v in failed}
        views = []
        for s in range(self.K):
            base = by_stage.get(s) or StageView(stage=s, restarts=self._restarts[s],
                                                starting=states[s] in protocol.STARTING_STATES,
                                                link_lost=states[s] == "link-lost")
            views.append(StageView(
                **{**base.__dict__,
                   "checkpoints": CheckpointStore(self.dir / "checkpoints", stage=s).verified_steps(),
                   "consumed": self._get(protocol.flow_consumed(s), 0, int),
                   "buffer_floor": self._get(protocol.buffer_floor(s), 0, int)}))
        return Observed(method=self.cfg.train.method, microbatches=self.cfg.train.microbatches,
                        max_restarts=self.cfg.train.max_restarts, stages=tuple(views))

    def _handle_failures(self, failed: list[StageView], states: list[str]) -> None:
        t_detect = time.monotonic_ns()
        self._kill([v.stage for v in failed])  # a hung (SIGSTOP) stage can never come back and interfere
        if self.cfg.train.ckpt_every <= 0:
            v = failed[0]
            self._fail(v.error.strip().splitlines()[0] if v.error else
                       f"stage {v.stage} {v.why}; the run has no checkpoints to recover from (--ckpt-every)")
            for f in failed:
                if f.error:
                    self._errors[str(f.stage)] = f.error
            self._kill(range(self.K))
            return
        decision = decide(self._observe(failed, states))
        if decision.action == "fail":
            for f in failed:
                if f.error:
                    self._errors[str(f.stage)] = f.error
            self._fail(decision.reason)
            self._kill(range(self.K))
            return
        self._set_state("recovering")
        if decision.action == "local":
            self._recover_local(decision, failed, t_detect)
        else:
            self._recover_global(decision, failed, t_detect)

    def _recover_local(self, d: Decision, failed: list[StageView], t_detect: int) -> None:
        m = self.cfg.train.microbatches
        self._kill(d.restart)
        links = sorted({link for s in d.restart for link in (s - 1, s) if 0 <= link < self.K - 1})
        for s in d.restart:
            # the upstream prunes its replay buffer below our checkpoint cursor: never past what we replay
            self._store.set(protocol.checkpoint_cursor(s), str(d.restore_step[s] * m))
        for link in links:
            self._link_gens[link] += 1
            self._store.set(protocol.link_generation(link), str(self._link_gens[link]))
        why = {v.stage: v.why for v in failed}
        for s in d.restart:
            self._restarts[s] += 1
            gen = self._gens[s] + 1
            self._book.open_local(s, gen=gen, reason=why.get(s, "a neighbour failed while it was starting"),
                                  t_detect=t_detect, store=self._store, failed=s in why)
            warm = self._spawn(self._launch(s, generation=gen, replacement=True, restore_step=d.restore_step[s]))
            self._book.set_warm(s, warm)

    def _recover_global(self, d: Decision, failed: list[StageView], t_detect: int) -> None:
        frontier = max(self._get(protocol.stage_step(s), 0, int) for s in range(self.K))
        self._kill(range(self.K))
        step = next(iter(d.restore_step.values()), 0)
        for s in range(self.K):
            for key in protocol.stage_keys_of_a_generation(s):
                if self._store.check([key]):
                    self._store.delete_key(key)
            self._store.set(protocol.checkpoint_cursor(s), str(step * self.cfg.train.microbatches))
        for link in range(self.K - 1):
            self._link_gens[link] += 1
            self._store.set(protocol.link_generation(link), str(self._link_gens[link]))
        cause = next((v for v in failed if not v.link_lost), failed[0])
        for v in failed:
            self._restarts[v.stage] += 1
        self._book.open_global(cause.stage, reason=f"{cause.why}: {d.reason}", t_detect=t_detect,
                               rollback_step=step, frontier_step=frontier, gen=self._gens[cause.stage] + 1,
                               store=self._store)
        warm = [self._spawn(self._launch(s, generation=self._gens[s] + 1, restore_step=step)) for s in range(self.K)]
        self._book.set_warm(cause.stage, next((w for w in warm if w), None))

    def _close_recoveries(self) -> None:
        self._book.close_ready(self._get, gens=self._gens)
        if self.state == "recovering" and not self._book.open_stages():
            self._set_state("running")

    # ---- the end --------------------------------------------------------------------------
    def _end(self) -> None:
        """Whatever happened: no process left, metrics.json written, a terminal state."""
        with self._lock:
            if self.state not in ("finishing",) + TERMINAL:
                self._set_state("finishing")
        try:
            self._kill([s for s in range(self.K) if self._procs[s] is not None])
        except Exception as err:
            self._errors.setdefault("coordinator", f"coordinator: ending the stage processes: {err}")
        for s in range(self.K):  # a stage's own error record, read before the store goes
            err = self._get(protocol.stage_error(s), "", str)
            if err and self._get(protocol.stage_state(s), "", str) == "error":
                self._errors.setdefault(str(s), err)
        state = self._final_state()
        eval_block, eval_note, eval_s = None, None, 0.0
        if state == "finished" and not self.cfg.train.final_eval:
            eval_note = "not evaluated (final_eval is off)"
        elif state == "finished":
            t_eval = time.monotonic()
            eval_block, eval_note = self._evaluate()
            eval_s = time.monotonic() - t_eval
            if "eval" in self._errors:
                state, self.reason = "failed", self._errors["eval"]
        elif state == "stopped":
            eval_note = self._stopped_note()
        for what, fn in (("the trace", lambda: write_trace(self.dir, self.K)),):
            try:
                fn()
            except Exception as err:
                self._errors.setdefault("coordinator", f"coordinator: writing {what}: {type(err).__name__}: {err}")
                state = "failed"
                self.reason = self.reason or f"coordinator: writing {what} failed: {err}"
        try:
            metrics = pipeline_metrics(self.cfg, self.dir, eval_block=eval_block, state=state,
                                       setup_s=(self._t_running - self._t_start) if self._t_running else 0.0,
                                       errors=self._errors, since_ns=self._t_start_ns,
                                       start_step=self._resume_step or 0)
        except Exception as err:
            state = "failed"
            self.reason = self.reason or f"coordinator: building metrics.json: {type(err).__name__}: {err}"
            metrics = {"config": self.cfg.to_dict(), "state": state, "errors": {"coordinator": traceback.format_exc()}}
        metrics.update({"state": state, "stopped": state != "finished", "reason": self.reason if state != "finished"
                        else "", "recovery": self.recoveries, "restarts": list(self._restarts),
                        "failures_not_injected": self._book.not_injected(self._get, state),
                        # what the user waited for: start to metrics.json, the final eval's part of it
                        "total_s": time.monotonic() - self._t_start, "eval_s": eval_s,
                        "downtime_s": self._book.downtime_s()})
        if eval_note:
            metrics["eval_skipped"] = eval_note
        if self._resume_step is not None:
            metrics["resumed_from_step"] = self._resume_step
        try:
            write_json_atomic(self.dir / run_dir.METRICS, metrics)
        except Exception as err:  # the directory went away: the metrics stay in memory
            metrics["errors"]["coordinator"] = f"coordinator: could not write metrics.json: {err}"
        with self._lock:
            self._standby.drop()
            self._store = None
            self.metrics = metrics
            self.state = state
        _LIVE_RUNS.discard(self)

    def _final_state(self) -> str:
        if self._errors:
            return "failed"
        per_stage = [self._get(protocol.stage_state(s), "", str) for s in range(self.K)]
        complete = all(x == "done" for x in per_stage) and \
            min(final_weight_steps(self.dir, self.K) or [0]) >= self.cfg.train.steps
        if complete:
            return "finished"  # a stop that arrives after the last step ended nothing
        if self._stop_requested_at is not None and self.reason == "stopped on request":
            return "stopped"
        if not self.reason:
            self.reason = f"the stages ended without finishing ({', '.join(per_stage)})"
        self._errors.setdefault("run", self.reason)
        return "failed"

    def _stopped_note(self) -> str:
        steps = final_weight_steps(self.dir, self.K)
        if steps and len(set(steps)) > 1:
            return (f"stopped with the stages at different steps ({steps}): final/ mixes them, so it is not "
                    f"evaluated; resume with `zerolock train --resume {self.dir}`")
        return "stopped before the last step: not evaluated"

    def _evaluate(self) -> tuple[dict[str, Any] | None, str | None]:
        args = (self.cfg.to_dict(), str(self.dir))
        p, _ = self._standby.take(evaluate_run, args)  # a standby no stage needed: its imports are done
        if p is None:
            p = start_process(evaluate_run, args, name="zerolock-eval")
        self._eval_proc = p
        p.join(EVAL_TIMEOUT_S)
        if p.is_alive():
            p.kill()
            p.join(10)
            return None, f"the final eval did not end within {EVAL_TIMEOUT_S:g} s"
        if self._stop_requested_at is not None and p.exitcode != 0:
            return None, "stopped during the final eval"
        path = self.dir / "eval.json"
        if p.exitcode != 0 or not path.exists():
            self._errors["eval"] = f"the final eval failed (exit code {p.exitcode})"
            return None, self._errors["eval"]
        return json.loads(path.read_text()), None


_LIVE_RUNS: set[Run] = set()


@atexit.register
def _stop_live_runs() -> None:
    """Closing the program stops its runs' processes."""
    for run in list(_LIVE_RUNS):
        run.stop(timeout=15)
