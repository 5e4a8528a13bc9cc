"""A link between two adjacent stages: its own 2-rank process group, point-to-point only.

Each link is built by its two endpoints alone from the coordinator's store under a
`link{k}/gen{g}` prefix, so no world-wide collective is needed and a later generation can
replace a failed link without touching the others.
"""
from __future__ import annotations

import datetime
import time

import torch
import torch.distributed as dist

from ..schedule import Link as LinkModel
from .link_emulation import EmulatedHop

HIDDEN, GRAD = 0, 1


def tag_of(kind: int, microbatch: int) -> int:
    return microbatch * 2 + kind


class Link:
    def __init__(self, store: dist.Store, *, link: int, upstream_end: bool, generation: int = 0,
                 device: torch.device, timeout_s: float = 300.0, emulation: LinkModel | None = None) -> None:
        self.link, self.generation, self.device = link, generation, device
        self.hop = EmulatedHop(emulation) if emulation is not None else None
        self.rank = 0 if upstream_end else 1
        self.peer = 1 - self.rank
        prefix = dist.PrefixStore(f"link{link}/gen{generation}", store)
        timeout = datetime.timedelta(seconds=timeout_s)
        if device.type == "cuda":
            self.pg = dist.ProcessGroupNCCL(prefix, self.rank, 2)
        else:
            self.pg = dist.ProcessGroupGloo(prefix, self.rank, 2, timeout)

    def send(self, tensor: torch.Tensor, *, kind: int, microbatch: int):
        def start():
            return self.pg.send([tensor], self.peer, tag_of(kind, microbatch))
        if self.hop is None:
            return start()
        return self.hop.submit(tensor.numel() * tensor.element_size(), start)

    def recv(self, buffer: torch.Tensor, *, kind: int, microbatch: int):
        return self.pg.recv([buffer], self.peer, tag_of(kind, microbatch))


class FlowControl:
    """The bounded inbound buffer: a sender may send hidden state i only once the receiver has
    consumed (forwarded) every state before i − depth. The receiver publishes how far it has
    consumed in the store; an absolute position, so a replacement replaying older micro-batches
    naturally holds its upstream back until it has caught up."""

    def __init__(self, store: dist.Store, *, receiver: int, depth: int, start: int = 0) -> None:
        """`start`: the first micro-batch of this process's work (after a restore, everything
        before it counts as consumed)."""
        self.store, self.key, self.depth, self.start = store, f"flow/{receiver}/consumed", depth, start
        self.known = start

    def consumed(self, microbatch: int) -> None:  # receiver side
        self.store.set(self.key, str(microbatch + 1))

    def _read(self) -> int:
        return int(self.store.get(self.key)) if self.store.check([self.key]) else self.start

    def wait_for_room(self, microbatch: int, poll) -> float:
        """Sender side: blocks until `microbatch` may be sent; returns seconds waited. `poll()` is
        called while waiting (it raises to abandon the wait: stop, or a link to rebuild)."""
        if microbatch - self.known < self.depth:
            return 0.0
        t0, delay = time.perf_counter(), 0.0002
        while True:
            self.known = self._read()
            if microbatch - self.known < self.depth:
                return time.perf_counter() - t0
            poll()
            time.sleep(delay)
            delay = min(0.005, delay * 2)
