"""`Run`: start, watch and stop a multi-process pipeline run (the CLI and the dashboard use it).

The coordinator lives in the calling process: it owns the rendezvous store (so a dying stage
cannot take it down), spawns one process per stage, watches them and their heartbeats from a
background thread, injects and recovers failures, and when they end writes metrics.json and
trace.json. No training happens in the caller's threads.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp

from ..artifacts import write_json_atomic
from ..config import FAILURE_MODES, FailureSpec, RunConfig
from ..telemetry import read_events
from .checkpoint import CheckpointStore
from .evaluate_run import evaluate_run
from .heartbeat import heartbeat_key
from .recovery_context import STOP_KEY, link_gen_key
from .report import load_stage_reports, pipeline_metrics, write_trace
from .stage_process import COMPLETE_KEY, StageLaunch, stage_main
from .standby import standby_main

TERMINAL = ("finished", "stopped", "failed")


class Run:
    def __init__(self, cfg: RunConfig, *, stop_grace_s: float = 10.0) -> None:
        if cfg.train.runtime != "pipeline":
            raise ValueError("Run drives --runtime pipeline runs")
        if not cfg.out:
            raise ValueError("a pipeline run needs an output directory (out)")
        self.cfg, self.dir = cfg, Path(cfg.out)
        self.K = cfg.train.stages
        self.stop_grace_s = stop_grace_s
        self.state = "created"
        self.metrics: dict[str, Any] | None = None
        self.recoveries: list[dict[str, Any]] = []
        self._procs: list[mp.Process | None] = [None] * self.K
        self._gens = [0] * self.K
        self._link_gens = [0] * max(0, self.K - 1)
        self._store: dist.TCPStore | None = None
        self._stop_requested_at: float | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._t_start = 0.0
        self._t_running: float | None = None
        self._pending_injections = [f for f in map(FailureSpec.parse, cfg.train.failures)
                                    if f.mode in ("kill", "stop")]
        self._hb: list[tuple[int, float]] = [(0, 0.0)] * self.K
        self._open: dict[int, dict[str, Any]] = {}  # recovery in progress, by stage
        self._seen_injections: set[str] = set()
        self._last_read: dict[str, Any] = {}  # store values as last seen: status() after the store is gone
        self._standby: tuple[mp.Process, Any] | None = None  # (process, pipe): see standby.py
        self._standby_was: str | None = None

    # ---- control --------------------------------------------------------------------------
    def start(self) -> "Run":
        if self.state != "created":
            raise RuntimeError(f"run already {self.state}")
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in ("events.jsonl", "metrics.json", "trace.json", "eval.json"):
            (self.dir / stale).unlink(missing_ok=True)
        for stale in ("checkpoints", "stages", "final"):  # a replacement must never restore an earlier run's state
            shutil.rmtree(self.dir / stale, ignore_errors=True)
        write_json_atomic(self.dir / "config.json", self.cfg.to_dict())
        self._store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        self._t_start = time.monotonic()
        for s in range(self.K):
            self._spawn(StageLaunch(stage=s, host="127.0.0.1", port=self._store.port, run_dir=str(self.dir)))
        self.state = "starting"
        _LIVE_RUNS.add(self)
        self._thread = threading.Thread(target=self._watch, name="zerolock-coordinator", daemon=True)
        self._thread.start()
        return self

    def stop(self, *, wait: bool = True, timeout: float | None = 60.0) -> dict[str, Any] | None:
        """Ask every stage to stop; they finish their current action, save and exit."""
        with self._lock:
            if self._store is not None and self._stop_requested_at is None and self.state not in TERMINAL:
                self._store.set(STOP_KEY, "1")
                self._stop_requested_at = time.monotonic()
                for p in self._procs:  # a stopped (SIGSTOP) stage must run to notice
                    if p is not None and p.pid and p.is_alive():
                        os.kill(p.pid, signal.SIGCONT)
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
        if self.state not in ("starting", "running"):
            raise ValueError(f"the run is {self.state}")
        if mode in ("kill", "stop"):
            self._kill(stage, mode)
        else:
            self._store.set(f"inject_request/{stage}", mode)
            self._store.set(f"inject/{stage}/{mode}/requested", str(time.monotonic_ns()))

    # ---- observation ----------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        steps = [self._get(f"stage/{s}/step", 0, int) for s in range(self.K)]
        states = [self._get(f"stage/{s}/state", "starting", str) for s in range(self.K)]
        per_stage = (self.metrics or {}).get("per_stage") or []
        if len(per_stage) == self.K:  # the stages' own final reports
            steps = [p["steps_done"] for p in per_stage]
        elapsed = time.monotonic() - self._t_start if self._t_start else 0.0
        done = min(steps) if steps else 0
        eta = None
        if self._t_running is not None and done > 0 and self.state == "running":
            per_step = (time.monotonic() - self._t_running) / done
            eta = per_step * (self.cfg.train.steps - done)
        return {"state": self.state, "stage_states": states, "stage_steps": steps, "steps_done": done,
                "total_steps": self.cfg.train.steps, "elapsed_s": elapsed, "eta_s": eta, "dir": str(self.dir),
                "recoveries": list(self.recoveries), "recovering": sorted(self._open)}

    def events(self, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Events written since byte `offset`, and the offset to ask from next time."""
        return read_events(self.dir / "events.jsonl", offset=offset)

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    # ---- processes ------------------------------------------------------------------------
    def _spawn(self, launch: StageLaunch) -> str | None:
        """Start the stage's process, from the standby if there is one: "ready" / "warming" (it was
        still importing) / None (a fresh process)."""
        self._store.set(f"stage/{launch.stage}/state", "spawned")
        args = (self.cfg.to_dict(), launch)
        p = self._take_standby(stage_main, args)
        warm = self._standby_was
        if p is None:
            ctx = mp.get_context("spawn")
            p = ctx.Process(target=stage_main, name=f"zerolock-stage{launch.stage}-gen{launch.generation}", args=args)
            p.start()
        self._procs[launch.stage] = p
        self._gens[launch.stage] = launch.generation
        self._hb[launch.stage] = (0, time.monotonic())
        return warm

    # ---- the warm standby (fault-tolerant runs) --------------------------------------------
    @property
    def wants_standby(self) -> bool:
        mode = self.cfg.train.warm_standby
        return mode == "on" or (mode == "auto" and (os.cpu_count() or 1) > self.K)

    @property
    def standby_ready(self) -> bool:
        """A standby is waiting with its imports done (a replacement would start from it)."""
        try:
            return self._standby is not None and self._standby[0].is_alive() and self._standby[1].poll()
        except (EOFError, OSError):
            return False

    def _keep_standby(self) -> None:
        """Have one standby ready while a fault-tolerant run trains (started only once every stage
        runs, so that its imports do not slow the stages' own start)."""
        if not (self.cfg.train.ckpt_every > 0 and self.wants_standby) or self.state != "running":
            return
        if self._open:  # a recovery is under way: its replacement needs the cores more than a new standby
            return
        if self._standby is not None and self._standby[0].is_alive():
            return
        ctx = mp.get_context("spawn")
        mine, theirs = ctx.Pipe()
        p = ctx.Process(target=standby_main, args=(theirs,), name="zerolock-standby")
        p.start()
        theirs.close()
        self._standby = (p, mine)

    def _take_standby(self, target, args: tuple) -> mp.Process | None:
        """Hand `target(*args)` to the standby; None if there is none alive. `self._standby_was`
        says how it was found: "ready" (imports done) or "warming" (still importing)."""
        self._standby_was = None
        if self._standby is None:
            return None
        p, conn = self._standby
        self._standby = None
        try:
            if not p.is_alive():
                return None
            ready = conn.poll() and conn.recv() == "ready"
            conn.send((target, args))
            self._standby_was = "ready" if ready else "warming"
            return p
        except (BrokenPipeError, EOFError, OSError):
            return None
        finally:
            conn.close()

    def _drop_standby(self) -> None:
        if self._standby is not None:
            p, conn = self._standby
            self._standby = None
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            conn.close()
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()

    def _kill(self, stage: int, mode: str) -> None:
        p = self._procs[stage]
        if p is None or not p.is_alive():
            return
        self._store.set(f"inject/{stage}/{mode}/t", str(time.monotonic_ns()))
        os.kill(p.pid, signal.SIGKILL if mode == "kill" else signal.SIGSTOP)

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

    def _launch(self, stage: int, **kw) -> StageLaunch:
        return StageLaunch(stage=stage, host="127.0.0.1", port=self._store.port, run_dir=str(self.dir), **kw)

    # ---- the coordinator thread -----------------------------------------------------------
    def _watch(self) -> None:
        errors: dict[int, str] = {}
        ft = self.cfg.train.ckpt_every > 0
        timeout = self.cfg.train.heartbeat_timeout_s
        while True:
            now = time.monotonic()
            if self.state == "starting" and all(self._get(f"stage/{s}/state", "", str) in ("running", "done")
                                                for s in range(self.K)):
                self.state, self._t_running = "running", now
            if not self._stop_requested_at:
                self._keep_standby()
            self._inject_due()
            stopping = self._stop_requested_at is not None
            failed = []
            for s, p in enumerate(self._procs):
                code = p.exitcode
                if code not in (None, 0):
                    failed.append((s, f"exit code {code}"))
                elif code is None and self._stale(s, now, timeout):
                    failed.append((s, f"no heartbeat for {timeout:g} s"))
            if failed and not stopping:
                if ft and all(not self._get(f"stage/{s}/error", "", str) for s, _ in failed):
                    self._recover(failed)
                else:
                    for s, why in failed:
                        errors[s] = self._get(f"stage/{s}/error", why, str)
                    self.stop(wait=False)
            self._close_recoveries()
            if ft and not stopping and all(self._get(f"stage/{s}/actions_done", "", str) for s in range(self.K)) \
                    and self._store is not None:
                self._store.set(COMPLETE_KEY, "1")
            if all(p.exitcode is not None for p in self._procs):
                break
            if stopping and now - self._stop_requested_at > self.stop_grace_s:
                for p in self._procs:
                    if p.is_alive():
                        p.kill()
            time.sleep(0.05)
        for s in range(self.K):
            if s not in errors and self._get(f"stage/{s}/state", "", str) == "error":
                errors[s] = self._get(f"stage/{s}/error", "error", str)
        self._finish(errors)

    def _stale(self, stage: int, now: float, timeout: float) -> bool:
        """Silent for `timeout` while running its actions."""
        beats = self._get(heartbeat_key(stage, self._gens[stage]), 0, int)
        last, since = self._hb[stage]
        if beats != last or self._get(f"stage/{stage}/state", "", str) != "running":
            # loading (imports can hold the GIL for seconds) is watched by the exit code alone
            self._hb[stage] = (beats, now)
            return False
        return now - since > timeout

    def _inject_due(self) -> None:
        for f in list(self._pending_injections):
            if self._gens[f.stage] == 0 and self._get(f"stage/{f.stage}/step", 0, int) >= f.step:
                self._pending_injections.remove(f)
                self._kill(f.stage, f.mode)

    # ---- recovery -------------------------------------------------------------------------
    def _failure_time(self, stage: int) -> tuple[str, int]:
        """The injected mode and when it was injected (ns), else 'crash' and now."""
        best = ("crash", time.monotonic_ns())
        for mode in FAILURE_MODES:
            for suffix in ("t", "api", "requested"):
                t = self._get(f"inject/{stage}/{mode}/{suffix}", None, int)
                if t is not None and f"{stage}/{mode}/{t}" not in self._seen_injections:
                    best = (mode, t)
            for f in self.cfg.train.failures:
                spec = FailureSpec.parse(f)
                t = self._get(f"inject/{stage}/{mode}/{spec.step}", None, int)
                if spec.stage == stage and t is not None and f"{stage}/{mode}/{t}" not in self._seen_injections:
                    best = (mode, t)
        self._seen_injections.add(f"{stage}/{best[0]}/{best[1]}")
        return best

    def _recover(self, failed: list[tuple[int, str]]) -> None:
        t_detect = time.monotonic_ns()
        local = self.cfg.train.method == "zerolock"
        m = self.cfg.train.microbatches
        for s, _ in failed:
            p = self._procs[s]
            if p.is_alive():  # hung (SIGSTOP): make sure it can never come back and interfere
                os.kill(p.pid, signal.SIGKILL)
            p.join()
        if local:
            for s, why in failed:
                if self._get(f"stage/{s}/state", "", str) == "link-lost":
                    local = False  # a survivor gave up: fall back to the global path
            newest = {s: CheckpointStore(self.dir / "checkpoints", stage=s).newest_verified_step() or 0
                      for s, _ in failed}
            for s, _ in failed:
                floor = self._get(f"buffer/{s - 1}/floor", 0, int) if s > 0 else 0
                if newest[s] * m < floor:
                    local = False  # the upstream buffer no longer holds what s must replay
        if local:
            for s, why in failed:
                mode, t_fail = self._failure_time(s)
                for link in (s - 1, s):
                    if 0 <= link < self.K - 1:
                        self._link_gens[link] += 1
                        self._store.set(link_gen_key(link), str(self._link_gens[link]))
                gen = self._gens[s] + 1
                resent0 = self._get(f"recovery/resent_bytes/{s - 1}", 0, int) if s > 0 else 0
                self._open[s] = {"stage": s, "mode": mode, "kind": "local", "reason": why, "gen": gen,
                                 "t_fail": t_fail, "t_detect": t_detect, "resent0": resent0}
                self._open[s]["warm_standby"] = self._spawn(self._launch(s, generation=gen, replacement=True))
            return
        self._recover_global(failed, t_detect)

    def _recover_global(self, failed: list[tuple[int, str]], t_detect: int) -> None:
        frontier = max(self._get(f"stage/{s}/step", 0, int) for s in range(self.K))
        for p in self._procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
            p.join()
        stores = [CheckpointStore(self.dir / "checkpoints", stage=s) for s in range(self.K)]
        rollback = min(st.newest_verified_step() or 0 for st in stores)
        for s in range(self.K):
            for key in (f"flow/{s}/consumed", f"stage/{s}/actions_done", f"stage/{s}/mb_done", f"stage/{s}/step"):
                if self._store.check([key]):
                    self._store.delete_key(key)
        for link in range(self.K - 1):
            self._link_gens[link] += 1
            self._store.set(link_gen_key(link), str(self._link_gens[link]))
        s0, why = failed[0]
        mode, t_fail = self._failure_time(s0)
        self._open = {s0: {"stage": s0, "mode": mode, "kind": "global", "reason": why, "t_fail": t_fail,
                           "t_detect": t_detect, "rollback_step": rollback, "frontier_step": frontier,
                           "gen": self._gens[s0] + 1, "fallback": self.cfg.train.method == "zerolock"}}
        warm = [self._spawn(self._launch(s, generation=self._gens[s] + 1, rollback_step=rollback))
                for s in range(self.K)]
        self._open[s0]["warm_standby"] = next((w for w in warm if w), None)

    def _close_recoveries(self) -> None:
        for s, r in list(self._open.items()):
            m = self.cfg.train.microbatches
            if r["kind"] == "local":
                restored = self._get(f"recovery/{s}/gen{r['gen']}/restored", None, str)
                caught = self._get(f"recovery/{s}/gen{r['gen']}/caught_up", None, int)
                if restored is None or caught is None:
                    continue
                t_restored, step, ckpt_bytes = map(int, restored.split())
                frontier = self._get(f"recovery/{s}/gen{r['gen']}/frontier", step * m, int)
                resent = (self._get(f"recovery/resent_bytes/{s - 1}", 0, int) - r["resent0"]) if s > 0 else 0
                replayed = max(0, frontier - step * m)
            else:
                restores = [self._get(f"recovery/{k}/gen{self._gens[k]}/restored", None, str) for k in range(self.K)]
                steps = [self._get(f"stage/{k}/step", 0, int) for k in range(self.K)]
                if None in restores or min(steps) < min(r["frontier_step"], self.cfg.train.steps):
                    continue
                parsed = [tuple(map(int, x.split())) for x in restores]
                t_restored = max(x[0] for x in parsed)
                ckpt_bytes = sum(x[2] for x in parsed)
                caught = time.monotonic_ns()
                replayed = max(0, r["frontier_step"] - r["rollback_step"]) * m * self.K
                # the replay sends every hidden state and every gradient across every hop again
                per_mb = self._get("meta/hidden_bytes_per_microbatch", 0, int)
                resent = max(0, r["frontier_step"] - r["rollback_step"]) * m * (self.K - 1) * 2 * per_mb
            rec = {"stage": s, "mode": r["mode"], "kind": r["kind"], "reason": r["reason"],
                   "detect_s": (r["t_detect"] - r["t_fail"]) / 1e9,
                   "restore_s": (t_restored - r["t_detect"]) / 1e9,
                   "replay_s": max(0, caught - t_restored) / 1e9,
                   "total_s": (max(caught, t_restored) - r["t_fail"]) / 1e9,
                   "replayed_microbatches": replayed,
                   "bytes_transferred": resent + ckpt_bytes, "checkpoint_bytes_read": ckpt_bytes,
                   "activation_bytes_resent": resent}
            for key in ("rollback_step", "fallback", "warm_standby"):
                if key in r:
                    rec[key] = r[key]
            self.recoveries.append(rec)
            del self._open[s]

    def _finish(self, errors: dict[int, str]) -> None:
        reports = load_stage_reports(self.dir, self.K)
        completed = len(reports) == self.K and min(r["steps_done"] for r in reports) >= self.cfg.train.steps
        # a stop that arrives after the last step ended nothing: the run finished
        state = "failed" if errors else ("stopped" if self._stop_requested_at is not None and not completed
                                         else "finished")
        self.state = "finishing"
        eval_block = None
        if not errors and all((self.dir / "final" / f"chunk{s}.safetensors").exists() for s in range(self.K)):
            args = (self.cfg.to_dict(), str(self.dir))
            p = self._take_standby(evaluate_run, args)  # a standby no stage needed: its imports are done
            if p is None:
                p = mp.get_context("spawn").Process(target=evaluate_run, args=args, name="zerolock-eval")
                p.start()
            p.join()
            if (self.dir / "eval.json").exists():
                eval_block = json.loads((self.dir / "eval.json").read_text())
        setup = (self._t_running - self._t_start) if self._t_running else 0.0
        self.metrics = pipeline_metrics(self.cfg, self.dir, eval_block=eval_block, state=state,
                                        setup_s=setup, errors=errors)
        self.metrics["recovery"] = self.recoveries
        self._drop_standby()
        write_trace(self.dir, self.K)
        write_json_atomic(self.dir / "metrics.json", self.metrics)
        self._store = None
        self.state = state
        _LIVE_RUNS.discard(self)


_LIVE_RUNS: set[Run] = set()


@atexit.register
def _stop_live_runs() -> None:
    """Closing the program stops its runs' processes."""
    for run in list(_LIVE_RUNS):
        run.stop(timeout=15)
