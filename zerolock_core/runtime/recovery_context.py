"""What a stage needs to take part in fault tolerance: checkpoints, injected failures, the replay
buffer of sent hidden states, and the store keys that coordinate rebuilding a link."""
from __future__ import annotations

import os
import signal
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ..config import FailureSpec
from .checkpoint import CheckpointStore

STOP_KEY = "control/stop"


def link_gen_key(link: int) -> str:
    return f"link/{link}/gen"


def need_key(link: int, gen: int) -> str:
    """Set by the downstream end of a rebuilt link: the first micro-batch it needs."""
    return f"need/{link}/gen{gen}"


class LinkRebuilt(Exception):
    """A neighbour was replaced: the named link must be rebuilt at a new generation."""

    def __init__(self, side: str, gen: int) -> None:
        super().__init__(f"{side} link rebuilt at generation {gen}")
        self.side, self.gen = side, gen


class BufferExhausted(RuntimeError):
    """The replay buffer no longer holds what a replaced downstream stage needs."""


def wait_key(store: dist.Store, key: str, *, timeout_s: float = 120.0) -> str:
    t0 = time.monotonic()
    while not store.check([key]):
        if store.check([STOP_KEY]):
            from .executor import StopRequested
            raise StopRequested()
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"timed out waiting for {key}")
        time.sleep(0.01)
    return store.get(key).decode()


@dataclass(kw_only=True)
class ReplayBuffer:
    """Hidden states this stage sent downstream, kept until the downstream stage's durable
    checkpoint no longer needs them (or the capacity forces the oldest out)."""
    capacity: int
    entries: "OrderedDict[int, torch.Tensor]" = field(default_factory=OrderedDict)
    floor: int = 0  # the oldest micro-batch still replayable

    def add(self, mb: int, h: torch.Tensor) -> None:
        self.entries[mb] = h
        while len(self.entries) > self.capacity:
            old, _ = self.entries.popitem(last=False)
            self.floor = old + 1

    def prune_below(self, mb: int) -> None:
        while self.entries and next(iter(self.entries)) < mb:
            self.entries.popitem(last=False)
        self.floor = max(self.floor, mb)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.entries.values())


@dataclass(kw_only=True)
class FaultTolerance:
    store: dist.Store
    stage: int
    generation: int
    checkpoints: CheckpointStore
    ckpt_every: int
    local_recovery: bool  # zerolock: survivors rebuild links instead of dying
    failures: tuple[FailureSpec, ...] = ()
    replay: ReplayBuffer | None = None
    injected: set = field(default_factory=set)

    def maybe_inject(self, mode: str, steps_done: int) -> None:
        """Self-inflicted failures that must land at an exact point: after the optimizer step
        (before the checkpoint), or in the middle of writing a checkpoint. Only the original
        process of a stage injects, once per spec."""
        if self.generation != 0:
            return
        request = f"inject_request/{self.stage}"
        if self.store.check([request]) and self.store.get(request).decode() == mode:
            self.store.delete_key(request)
            self.store.set(f"inject/{self.stage}/{mode}/api", str(time.monotonic_ns()))
            os.kill(os.getpid(), signal.SIGKILL)
        for f in self.failures:
            if f.stage == self.stage and f.mode == mode and steps_done >= f.step and f not in self.injected:
                self.injected.add(f)
                self.store.set(f"inject/{self.stage}/{f.mode}/{f.step}", str(time.monotonic_ns()))
                os.kill(os.getpid(), signal.SIGKILL)
