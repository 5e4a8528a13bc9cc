"""Injected failures, on the stage's side: each lands at an exact point of the stage's work.

A `--fail STAGE@STEP:MODE` spec fires once the stage has completed STEP optimizer steps:
  kill      SIGKILL in the middle of the next update window (right after its first forward)
  stop      SIGSTOP at the same point (the process hangs; only missing heartbeats reveal it)
  post-step SIGKILL right after the STEP-th optimizer step, before its checkpoint
  mid-ckpt  SIGKILL while writing the first checkpoint at or after STEP (files written, no manifest)
  slow=X    no signal: a straggler, its compute X times slower from STEP on (`straggle`, runtime/pace.py)
The stage fires them itself, so the point is exact on any machine; the dashboard's "kill now" is a
real signal from the coordinator instead. Every injection is recorded before it fires — in the
store (`protocol.injected`, for the coordinator's records) and as a marker file in the run
directory (which outlives the store: a resumed run or a restarted torchrun job has a new one) —
and a process never fires one that is recorded already: a replacement, a stage restarted by a
global rollback or a resumed run does not take its predecessor's failure again; a second spec for
the same stage does fire, in whatever generation reaches it.
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
import torch.distributed as dist

from ..config.run_config import STRAGGLER, STRAGGLER_FACTOR, FailureSpec
from ..rundir.run_dir import RunDir
from . import protocol

SIGNAL_OF = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP, "post-step": signal.SIGKILL,
             "mid-ckpt": signal.SIGKILL}


@dataclass(kw_only=True)
class FaultInjection:
    store: dist.Store
    stage: int
    run_dir: RunDir
    failures: tuple[FailureSpec, ...] = ()
    live_straggle: float = 1.0  # a straggler injected from the dashboard

    def _marker(self, label: str):
        return self.run_dir.injected_marker(self.stage, label)

    def _taken(self, label: str) -> bool:
        return self.store.check([protocol.injected(self.stage, label)]) or self._marker(label).exists()

    def mid_window(self, steps_done: int) -> None:
        self._fire(("kill", "stop"), steps_done)

    def post_step(self, steps_done: int) -> None:
        self._fire(("post-step",), steps_done)

    def mid_checkpoint(self, steps_done: int) -> None:
        self._fire(("mid-ckpt",), steps_done)

    def straggle(self, steps_done: int) -> float:
        """How many times slower this stage computes once it has done `steps_done` steps: the largest factor
        of the stragglers reached (a replacement is as slow: the device is), 1 where none is. Each straggler
        is recorded the first time; one from the dashboard stays for this process."""
        request = protocol.inject_request(self.stage)
        if self.store.check([request]):
            mode, _, label = self.store.get(request).decode().partition(" ")
            if mode == STRAGGLER:
                self.store.delete_key(request)
                self._record(label)
                self.live_straggle = STRAGGLER_FACTOR
        factor = self.live_straggle
        for f in self.failures:
            if f.stage == self.stage and not f.recovers and steps_done >= f.step:
                if not self._taken(f.label):
                    self._record(f.label)
                factor = max(factor, f.factor)
        return factor

    def _fire(self, modes: tuple[str, ...], steps_done: int) -> None:
        request = protocol.inject_request(self.stage)  # the API's post-step / mid-ckpt
        if self.store.check([request]):
            mode, _, label = self.store.get(request).decode().partition(" ")
            if mode in modes:
                self.store.delete_key(request)
                self._hit(label, mode)
        for f in self.failures:
            if f.stage == self.stage and f.mode in modes and steps_done >= f.step \
                    and not self._taken(f.label):
                self._hit(f.label, f.mode)

    def _record(self, label: str) -> None:
        marker = self._marker(label)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(str(time.time()))
        self.store.set(protocol.injected(self.stage, label), str(time.monotonic_ns()))

    def _hit(self, label: str, mode: str) -> None:
        self._record(label)
        os.kill(os.getpid(), SIGNAL_OF[mode])
        if mode == "stop":
            # SIGCONT after a stop means the coordinator is stopping the run (it kills a stage it
            # declared hung): carry on, the next poll sees the stop request.
            return
        time.sleep(60)  # not reached: SIGKILL cannot be caught
