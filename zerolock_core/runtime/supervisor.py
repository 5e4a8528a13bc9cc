"""The coordinator's hold on its stage processes: start them (from the warm standby where there is
one), kill them, and tell which have failed — exited, silent for the heartbeat timeout, or still
starting after the start-up timeout — and whether the pipeline as a whole still makes progress.

No decisions here: what to do about a failed stage is `recovery_policy.decide`'s, what to do next is
`Run`'s. Everything is called from the coordinator's thread, under the run's lock.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import time
from multiprocessing.process import BaseProcess
from typing import Any, Callable

from ..config.run_config import RunConfig
from . import protocol
from .processes import start_process
from .recovery_policy import StageView
from .stage_process import StageLaunch
from .standby import Standby
from .store_view import StoreView

STARTUP_TIMEOUT_S = 600.0  # a stage process still loading after this long has hung
MIN_STALL_S = 60.0  # the automatic stall timeout is at least this, and 10x the slowest step seen
JOIN_S = 10.0  # a killed process is reaped within this


def _signal(p: BaseProcess, sig: int) -> bool:
    """Send `sig` to a stage process unless it has already exited; whether it was sent. A process can
    exit, and be reaped by another thread's `is_alive`, between any check and the signal."""
    if p.pid is None or not p.is_alive():
        return False
    try:
        os.kill(p.pid, sig)
    except ProcessLookupError:
        return False
    return True


class StageSupervisor:
    def __init__(self, cfg: RunConfig, store: StoreView, *, run_dir: str,
                 target: Callable[[dict[str, Any], StageLaunch], None]) -> None:
        self.cfg, self.store, self.run_dir, self.target = cfg, store, run_dir, target
        self.K = cfg.train.stages
        self.procs: list[BaseProcess | None] = [None] * self.K
        self.gens = [0] * self.K  # the generation of each stage's current process
        self.restarts = [0] * self.K
        self.standby = Standby()
        self._hb: list[tuple[int, float]] = [(0, 0.0)] * self.K  # (beats seen, when they last changed)
        self._spawned_at = [0.0] * self.K
        self._progress_sig: tuple | None = None
        self._last_progress = time.monotonic()
        self._step_seen: list[tuple[int, float]] = [(0, 0.0)] * self.K
        self._slowest_step_s = 0.0

    def start_at(self, step: int) -> None:
        """Every stage begins at optimizer step `step` (a resumed run): the store says so from the first
        moment, before any stage process has restored its checkpoint, and the first step after it is
        not timed from the start-up."""
        for s in range(self.K):
            self.store.set(protocol.stage_step(s), str(step))
        self._step_seen = [(step, 0.0)] * self.K

    # ---- processes ------------------------------------------------------------------------------
    def launch(self, stage: int, **kw) -> StageLaunch:
        return StageLaunch(stage=stage, host="127.0.0.1", port=self.store.port, run_dir=self.run_dir, **kw)

    def spawn(self, launch: StageLaunch) -> str | None:
        """Start the stage's process, from the standby if there is one: "ready" / "warming" (it was
        still importing) / None (a fresh process)."""
        self.store.set(protocol.stage_state(launch.stage), protocol.STARTING_STATES[0])
        launch = dataclasses.replace(launch, spawned_ns=time.monotonic_ns())
        args = (self.cfg.to_dict(), launch)
        p, warm = self.standby.take(self.target, args)
        if p is None:
            p = start_process(self.target, args, name=f"zerolock-stage{launch.stage}-gen{launch.generation}")
        self.procs[launch.stage] = p
        self.gens[launch.stage] = launch.generation
        self._hb[launch.stage] = (0, time.monotonic())
        self._spawned_at[launch.stage] = time.monotonic()
        return warm

    def kill(self, stages) -> None:
        stages = [s for s in stages if self.procs[s] is not None]
        for s in stages:
            _signal(self.procs[s], signal.SIGKILL)
        for s in stages:
            self.procs[s].join(JOIN_S)

    def kill_all(self) -> None:
        self.kill(range(self.K))

    def wake_all(self) -> None:
        """SIGCONT to every stage: a stopped (SIGSTOP) stage must run to notice a stop request."""
        for p in self.procs:
            if p is not None:
                _signal(p, signal.SIGCONT)

    def send_signal(self, stage: int, sig: int) -> bool:
        """Send `sig` to the stage's process; False when it has none running."""
        p = self.procs[stage]
        return p is not None and _signal(p, sig)

    def all_exited(self) -> bool:
        return all(p is not None and p.exitcode is not None for p in self.procs)

    def alive(self, stage: int) -> bool:
        p = self.procs[stage]
        return p is not None and p.is_alive()

    def pid(self, stage: int) -> int | None:
        p = self.procs[stage]
        return p.pid if p is not None else None

    # ---- failures -------------------------------------------------------------------------------
    def failed_stages(self, now: float, states: list[str], *,
                      injected: Callable[[int], bool]) -> list[StageView]:
        """The stages whose process exited unexpectedly, went silent, or never finished starting."""
        timeout = self.cfg.train.heartbeat_timeout_s
        failed = []
        for s, p in enumerate(self.procs):
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
                failed.append(StageView(stage=s, failed=True, why=why,
                                        error=self.store.get(protocol.stage_error(s), "", str),
                                        reached_running=injected(s) or states[s] in ("running", "link-lost", "done"),
                                        link_lost=states[s] == "link-lost", restarts=self.restarts[s]))
        return failed

    def _stale(self, stage: int, now: float, timeout: float, state: str) -> bool:
        """Silent for `timeout` while running its actions."""
        beats = self.store.get(protocol.heartbeat(stage, self.gens[stage]), 0, int)
        last, since = self._hb[stage]
        if beats != last or state != "running":
            # loading (imports can hold the GIL for seconds) is watched by the start-up timeout
            self._hb[stage] = (beats, now)
            return False
        return now - since > timeout

    def stalled(self, now: float, states: list[str], *, recovering: bool) -> str | None:
        """Why the pipeline counts as stuck — no action anywhere for the stall timeout while every stage
        runs — or None."""
        sig = tuple(self.store.get(protocol.progress(s, self.gens[s]), 0, int) for s in range(self.K)) + tuple(states)
        if sig != self._progress_sig or any(x not in ("running", "done") for x in states):
            self._progress_sig, self._last_progress = sig, now
        for s in range(self.K):
            step = self.store.get(protocol.stage_step(s), 0, int)
            last, at = self._step_seen[s]
            if step == last + 1 and at > 0 and not recovering:
                self._slowest_step_s = max(self._slowest_step_s, now - at)
            if step != last:
                self._step_seen[s] = (step, now)
        limit = self.cfg.train.stall_timeout_s or max(MIN_STALL_S, 10 * self._slowest_step_s)
        if now - self._last_progress <= limit:
            return None
        where = ", ".join(f"stage {s} {states[s]} at step {self.store.get(protocol.stage_step(s), 0, int)}"
                          for s in range(self.K))
        return (f"the pipeline stalled: no stage ran an action for {now - self._last_progress:.0f} s "
                f"(limit {limit:.0f} s; {where})")
