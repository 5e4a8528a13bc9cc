"""A link between two adjacent stages: its own 2-rank process group, point-to-point only.

Each link is built by its two endpoints alone from the coordinator's store under the prefix
`protocol.link_prefix(link, generation)`, so no world-wide collective is needed and a later
generation can replace a failed link without touching the others. Every failure of the transport
(connect, send, receive, wait) comes out as one typed error, `LinkBroken`.

Before the process group is built, each end says hello in the store and waits for its peer's,
polling: the backend's own connect cannot be interrupted, so a survivor must not enter it while
its peer may never come (a replacement killed while it starts because another stage failed). The
wait gives up as soon as the coordinator announces a newer generation of the link (`LinkRebuilt`:
build that one instead) or a stop.
"""
from __future__ import annotations

import datetime
import time

import torch
import torch.distributed as dist

from ..schedule import LinkProfile
from . import protocol
from .errors import LinkBroken, StopRequested
from .link_emulation import EmulatedHop

HIDDEN, GRAD = 0, 1
DEFAULT_TIMEOUT_S = 300.0


def tag_of(kind: int, microbatch: int) -> int:
    return microbatch * 2 + kind


class LinkWork:
    """An in-flight send or receive; `wait()` raises `LinkBroken` if the transport failed."""

    def __init__(self, link: "Link", what: str, work) -> None:
        self._link, self._what, self._work = link, what, work

    def wait(self) -> None:
        try:
            self._work.wait()
        except Exception as err:  # whatever the backend raises for a dead peer or a timeout
            raise LinkBroken(self._link.link, self._link.generation, self._what, err) from err


class Link:
    def __init__(self, store: dist.Store, *, link: int, upstream_end: bool, generation: int = 0,
                 device: torch.device, timeout_s: float = DEFAULT_TIMEOUT_S,
                 emulation: LinkProfile | None = None) -> None:
        self.link, self.generation, self.device = link, generation, device
        self.hop = EmulatedHop(emulation) if emulation is not None else None
        self.rank = 0 if upstream_end else 1
        self.peer = 1 - self.rank
        self.side = "next" if upstream_end else "prev"  # which of this process's links it is
        self._await_peer(store, timeout_s)
        prefix = dist.PrefixStore(protocol.link_prefix(link, generation), store)
        timeout = datetime.timedelta(seconds=timeout_s)
        try:
            if device.type == "cuda":
                self.pg = dist.ProcessGroupNCCL(prefix, self.rank, 2)
            else:
                self.pg = dist.ProcessGroupGloo(prefix, self.rank, 2, timeout)
        except Exception as err:
            raise LinkBroken(link, generation, "connect", err) from err

    def _await_peer(self, store: dist.Store, timeout_s: float) -> None:
        store.set(protocol.link_hello(self.link, self.generation, self.rank), "1")
        peer_key = protocol.link_hello(self.link, self.generation, self.peer)
        t0 = time.monotonic()
        while not store.check([peer_key]):
            if store.check([protocol.STOP]):
                raise StopRequested()
            protocol.raise_if_rebuilt(store, link=self.link, generation=self.generation, side=self.side)
            if time.monotonic() - t0 > timeout_s:
                raise LinkBroken(self.link, self.generation, "connect",
                                 TimeoutError(f"the peer did not arrive within {timeout_s:g} s"))
            time.sleep(0.01)

    def send(self, tensor: torch.Tensor, *, kind: int, microbatch: int) -> LinkWork:
        what = f"send of {'hidden state' if kind == HIDDEN else 'gradient'} {microbatch}"

        def start():
            return self.pg.send([tensor], self.peer, tag_of(kind, microbatch))
        try:
            work = start() if self.hop is None else self.hop.submit(tensor.numel() * tensor.element_size(), start)
        except Exception as err:
            raise LinkBroken(self.link, self.generation, what, err) from err
        return LinkWork(self, what, work)

    def recv(self, buffer: torch.Tensor, *, kind: int, microbatch: int) -> LinkWork:
        what = f"receive of {'hidden state' if kind == HIDDEN else 'gradient'} {microbatch}"
        try:
            work = self.pg.recv([buffer], self.peer, tag_of(kind, microbatch))
        except Exception as err:
            raise LinkBroken(self.link, self.generation, what, err) from err
        return LinkWork(self, what, work)


class FlowControl:
    """The bounded inbound buffer: a sender may send hidden state i only once the receiver has
    consumed (forwarded) every state before i − depth. The receiver publishes how far it has
    consumed in the store; an absolute position, so a replacement replaying older micro-batches
    naturally holds its upstream back until it has caught up."""

    def __init__(self, store: dist.Store, *, receiver: int, depth: int, start: int = 0,
                 receiving_end: bool = False) -> None:
        """`start`: the first micro-batch of this process's work (after a restore, everything
        before it counts as consumed). The receiving end publishes `start` at once, so a stale
        position of a dead predecessor never lets the sender run ahead of this process."""
        self.store, self.key, self.depth, self.start = store, protocol.flow_consumed(receiver), depth, start
        self.known = start
        if receiving_end:
            self.store.set(self.key, str(start))

    def consumed(self, microbatch: int) -> None:  # receiver side
        self.store.set(self.key, str(microbatch + 1))

    def _read(self) -> int:
        return protocol.get_int(self.store, self.key, self.start)

    def wait_for_room(self, microbatch: int, poll) -> float:
        """Sender side: blocks until `microbatch` may be sent; returns seconds waited. `poll()` is
        called while waiting (it raises to abandon the wait: stop, or a link to rebuild); the
        coordinator's stall detection ends a wait that never returns."""
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
