"""Runs one stage's action list literally, emitting an event per action.

The schedule decides everything a stage does, CKPT included: the executor looks each action's kind
up in one table of handlers. Receives are preposted (`irecv`) up to the in-flight depth, so compute
waits only on the one micro-batch it needs; sends are asynchronous and their buffers are kept alive
until completed. Every action is idempotent, so that after a link is rebuilt (RELINK, recorded like
any action) the action that was interrupted can simply run again: a receive that completed is not
posted twice, and a send already delivered on the link's current generation is not sent twice
(`SendLedger`). Only `LinkBroken` — raised by the transport itself — starts a relink.
"""
from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import torch
import torch.distributed as dist

from ..methods import LOCAL_METHODS, method as method_entry, splits_backward
from ..schedule import Action, Kind
from ..train.stage_worker import StageWorker, StepLoss
from ..telemetry import ActivationMeter, Event, EventWriter
from ..vocabulary import is_busy
from ..method import boundary
from . import protocol
from .checkpoint import CheckpointStore, capture
from .errors import BufferExhausted, LinkBroken, LinkRebuilt, MemoryBudgetExceeded, StopRequested
from .fault_injection import FaultInjection
from .links import GRAD, HIDDEN, FlowControl, Link
from .loss_log import LossLog
from .pace import Pace
from .replay_buffer import ReplayBuffer
from .send_ledger import SendLedger
from .weight_stash import WeightStash

RELINK_WAIT_S = 120.0  # a survivor waits this long for the coordinator to announce a replacement


@dataclass(kw_only=True)
class StageCounters:
    bytes_sent: int = 0
    bytes_received: int = 0
    bytes_resent: int = 0
    actions: int = 0  # actions run (the heartbeat publishes it: the coordinator's stall detection)
    peak_inflight: int = 0
    first_ns: int | None = None
    last_ns: int = 0


@dataclass(kw_only=True)
class Wiring:
    """How a stage reaches its neighbours."""
    prev: Link | None
    next: Link | None
    flow_in: FlowControl | None
    flow_out: FlowControl | None
    make_link: Callable[[str, int], Link]  # (side, generation) -> a new link


@dataclass(kw_only=True)
class Durability:
    """Fault tolerance on a stage: checkpoints, replay buffer, injected failures, where a replay ends."""
    store: dist.Store
    generation: int
    checkpoints: CheckpointStore
    injection: FaultInjection
    local_recovery: bool  # ZeroLock under the local coordinator: survivors rebuild links instead of dying
    replay: ReplayBuffer | None = None  # stages that send hidden states downstream
    replay_until: int = 0  # micro-batches below this are a replacement's replay
    # the downstream stage's process already has these: set at launch (a replacement replaying what
    # its downstream consumed) and reset by every relink to what the downstream's new process needs
    skip_sends_below: int = 0


class Executor:
    def __init__(self, *, stage: int, stages: int, method: str, worker: StageWorker,
                 microbatch_data: Callable[[int], dict[str, torch.Tensor]], hidden_shape: tuple[int, ...],
                 wiring: Wiring, events: EventWriter, poll: Callable[[], None],
                 on_step: Callable[[int], None], device: torch.device, depth: int = 2,
                 memory_budget_bytes: int = 0, durability: Durability | None = None,
                 loss_log: LossLog | None = None, pace: Pace | None = None, frozen_stages: int = 0) -> None:
        self.stage, self.stages, self.method = stage, stages, method
        self.worker, self.data, self.hidden_shape = worker, microbatch_data, hidden_shape
        self.wiring, self.events, self.poll, self.on_step = wiring, events, poll, on_step
        self.device, self.depth, self.memory_budget_bytes = device, depth, memory_budget_bytes
        self.ft = durability
        self.pace = pace or Pace()
        self.bp = method not in LOCAL_METHODS
        # --frozen-stages: a frozen BP stage forwards only (no graph, nothing held past its send); the first
        # stage that trains takes its input as a constant, so no gradient goes back into the frozen ones
        self.forward_only = self.bp and not worker.trains
        self.input_needs_grad = self.bp and stage > frozen_stages
        self.meter = ActivationMeter([*worker.chunk.parameters(), *worker.chunk.buffers()])
        self.stash = WeightStash(worker.chunk, meter=self.meter) \
            if not method_entry(method).flushes and worker.trains else None  # unflushed: several weight versions
        self.split = splits_backward(method)
        self.counters = StageCounters()
        self.ledger = SendLedger()
        self.held: dict[int, tuple[torch.Tensor | None, torch.Tensor]] = {}  # mb -> (h_in, h_out)
        self.received: dict[int, torch.Tensor] = {}  # mb -> message (received, not yet forwarded)
        self.upstream_rows: dict[int, torch.Tensor] = {}  # mb -> the upstream's adapted readout rows
        self.grads_in: dict[int, torch.Tensor] = {}
        self.grads_out: dict[int, torch.Tensor] = {}
        self.weight_grads: dict[int, Callable[[], None]] = {}  # mb -> its W, holding the graph its B kept
        self.posted: dict[tuple[Kind, int], tuple[object, torch.Tensor]] = {}
        self.sends: list[tuple[object, torch.Tensor]] = []
        self.next_hidden = 0  # the next micro-batch whose hidden state goes downstream
        self.loss_to_report: float | None = None  # goes out on the next event (live loss curves)
        self.loss_log = loss_log
        self._step_losses: dict[int, list[StepLoss]] = {}  # 0-based step -> per micro-batch, until its STEP
        self._recv_plan: Iterator[Action] = iter(())  # the receive actions ahead, read lazily
        self._unreceived: deque[Action] = deque()  # receives taken from the plan, not yet received
        self.handlers: dict[Kind, Callable[[int | None], tuple[int, int]]] = {
            Kind.RF: self._do_RF, Kind.RB: self._do_RB, Kind.F: self._do_F, Kind.L: self._do_L,
            Kind.B: self._do_B, Kind.W: self._do_W, Kind.STEP: self._do_STEP, Kind.CKPT: self._do_CKPT,
            Kind.SF: self._do_SF, Kind.SB: self._do_SB,
        }

    @property
    def prev(self) -> Link | None:
        return self.wiring.prev

    @property
    def next(self) -> Link | None:
        return self.wiring.next

    # ---- the loop -------------------------------------------------------------------------
    def run(self, actions: Iterable[Action], *, first_mb: int = 0) -> None:
        """Run `actions` in order (a lazy stream: the receives ahead are read from a copy of it, at most a
        few actions in front); `first_mb` is the first micro-batch they touch."""
        actions, ahead = itertools.tee(actions)
        self._recv_plan = (a for a in ahead if a.kind in (Kind.RF, Kind.RB))
        self._unreceived.clear()
        self.next_hidden = first_mb
        self._guarded(self._prepost)
        self.pace.at_step(self.worker.steps_done)
        for action in actions:
            self._guarded(self.poll)
            t0, c0 = time.monotonic_ns(), time.process_time_ns()
            handler = self.handlers[action.kind]
            sent, recv = self._guarded(lambda: handler(action.microbatch))
            t1, cpu = time.monotonic_ns(), time.process_time_ns() - c0
            kind = Kind.REPLAY.value if self._is_replay(action) else action.kind.value
            # a slowed stage (--stage-speed, a straggler): the one place its compute is stretched
            t1, paced = self.pace.stretch(t0, t1, cpu) if is_busy(kind) else (t1, 0)
            self._record(kind, action.microbatch, t0, t1, sent, recv, paced_ns=paced, cpu_ns=cpu)
            if action.kind == Kind.STEP:
                self._after_step()
            elif action.kind == Kind.F and self.ft is not None:
                self.ft.injection.mid_window(self.worker.steps_done)
        self._guarded(self._drain_sends)

    def serve_replays(self, done: Callable[[], bool]) -> None:
        """After our own actions: keep rebuilding links (and resending) until `done()`."""
        while not done():
            self._guarded(self.poll)
            time.sleep(0.02)

    def _is_replay(self, action: Action) -> bool:
        return (self.ft is not None and action.kind == Kind.F and action.microbatch is not None
                and action.microbatch < self.ft.replay_until)

    def _guarded(self, fn):
        """Runs fn; a broken link (ZeroLock under the coordinator) is rebuilt and fn run again —
        safe because every handler is idempotent. A relink is itself guarded: its peer may be
        replaced again while we connect (a second failure), and then the newer link is built."""
        relink: tuple[str, int] | None = None
        while True:
            try:
                if relink is not None:
                    self._relink(*relink)
                    relink = None
                return fn()
            except LinkRebuilt as rebuilt:
                relink = (rebuilt.side, rebuilt.gen)
            except LinkBroken:
                if self.ft is None or not self.ft.local_recovery:
                    raise
                # a relink that failed waits for a generation after the one it tried
                relink = self._wait_for_rebuild(tried=relink)

    def _record(self, kind: str, mb: int | None, t0: int, t1: int, sent: int, recv: int, *, paced_ns: int = 0,
                cpu_ns: int = 0, resends: list[list[int]] | None = None) -> None:
        """One action done: its event (busy / idle are computed from the events, telemetry/activity.py)."""
        c = self.counters
        c.actions += 1
        c.first_ns = t0 if c.first_ns is None else c.first_ns
        c.last_ns = t1
        c.bytes_sent += sent
        c.bytes_received += recv
        inflight = len(self.held) + len(self.weight_grads)  # a micro-batch awaiting W still holds its graph
        c.peak_inflight = max(c.peak_inflight, inflight)
        self.events.write(Event(stage=self.stage, kind=kind, mb=mb, t0=t0, t1=t1,
                                act_bytes=self.meter.current_bytes, inflight=inflight, sent=sent,
                                recv=recv, step=self.worker.steps_done,
                                gen=self.ft.generation if self.ft else 0, loss=self.loss_to_report,
                                paced_ns=paced_ns, cpu_ns=cpu_ns, resends=resends))
        self.loss_to_report = None
        if self.memory_budget_bytes and self.meter.peak_bytes > self.memory_budget_bytes:
            raise MemoryBudgetExceeded(
                f"stage {self.stage}: activations peaked at {self.meter.peak_bytes / 2**20:.2f} MiB during "
                f"{kind}{'' if mb is None else mb}, over the memory budget of "
                f"{self.memory_budget_bytes / 2**20:.2f} MiB")

    # ---- receives -------------------------------------------------------------------------
    def _receives_ahead(self) -> Iterator[Action]:
        """The receive actions not yet received, in order: those taken from the plan, then the plan's next."""
        yield from list(self._unreceived)
        for a in self._recv_plan:
            self._unreceived.append(a)
            yield a

    def _prepost(self) -> None:
        """Post receives for the next `depth` receive actions not yet posted."""
        for a in self._receives_ahead():
            if len(self.posted) >= max(1, self.depth):
                return
            if (a.kind, a.microbatch) in self.posted:
                continue
            shape = self.hidden_shape
            if a.kind == Kind.RF and not self.bp and self.worker.chunk.receives_readout:
                # the upstream's readout rows travel with h
                shape = boundary.message_shape(shape, self.worker.upstream_rows(self.data(a.microbatch)))
            buf = torch.empty(shape, device=self.device)
            link, kind = (self.prev, HIDDEN) if a.kind == Kind.RF else (self.next, GRAD)
            self.posted[(a.kind, a.microbatch)] = (link.recv(buf, kind=kind, microbatch=a.microbatch), buf)

    def _receive(self, kind: Kind, mb: int, into: dict[int, torch.Tensor]) -> int:
        """Wait for (kind, mb) and put it in `into`; a no-op if it is there already (a retry)."""
        if mb not in into:
            if (kind, mb) not in self.posted:
                self._prepost()
            assert (kind, mb) in self.posted, f"stage {self.stage}: {kind}{mb} was never posted"
            work, buf = self.posted[(kind, mb)]
            work.wait()
            del self.posted[(kind, mb)]
            self._unreceived.remove(Action(stage=self.stage, kind=kind, microbatch=mb))
            into[mb] = buf
        self._prepost()
        return into[mb].numel() * into[mb].element_size()

    def _do_RF(self, mb: int) -> tuple[int, int]:
        return 0, self._receive(Kind.RF, mb, self.received)

    def _do_RB(self, mb: int) -> tuple[int, int]:
        return 0, self._receive(Kind.RB, mb, self.grads_in)

    # ---- compute --------------------------------------------------------------------------
    def _do_F(self, mb: int) -> tuple[int, int]:
        batch = self.data(mb)
        if self.stage == 0:
            h_in, x = None, batch["input_ids"]
        else:
            h_in = self.received.pop(mb)
            if self.wiring.flow_in is not None:
                self.wiring.flow_in.consumed(mb)
            if self.bp:
                h_in.requires_grad_(self.input_needs_grad)
            else:
                h_in, rows = self.worker.incoming(batch, h_in, self.hidden_shape)
                if rows is not None:
                    self.upstream_rows[mb] = rows
            x = h_in
        with self.meter.measuring():
            if self.stash is not None:
                h_out = self.stash.forward(mb, x, batch["attention_mask"])
            else:
                h_out = self.worker.forward(batch, x)
        self.held[mb] = (h_in, h_out)
        return 0, 0

    def _do_L(self, mb: int) -> tuple[int, int]:
        h_in, h_out = self.held.pop(mb)
        with self.meter.measuring():
            loss = self.worker.local_backward(self.data(mb), h_in, h_out, self.upstream_rows.pop(mb, None))
        self._record_loss(mb, loss)
        if self.ft is not None:
            self.ft.store.set(protocol.microbatches_done(self.stage), str(mb + 1))
        return 0, 0

    def _do_B(self, mb: int) -> tuple[int, int]:
        h_in, h_out = self.held.pop(mb)
        if self.split:
            self._split_B(mb, h_in, h_out)
        elif self.stage == self.stages - 1:
            self._record_loss(mb, self.worker.bp_loss_backward(self.data(mb), h_out))
        else:
            self.worker.bp_backward(h_out, self.grads_in.pop(mb))
        if self.stash is not None:
            self.stash.after_backward(mb)
        if h_in is not None and h_in.requires_grad:
            self.grads_out[mb] = h_in.grad
        return 0, 0

    def _split_B(self, mb: int, h_in: torch.Tensor | None, h_out: torch.Tensor) -> None:
        """B of a split backward: the input gradient only; its W waits in `weight_grads`."""
        if self.stage == self.stages - 1:
            root, loss = self.worker.bp_loss(self.data(mb), h_out)
            self._record_loss(mb, loss)
            grad = None
        else:
            root, grad = h_out, self.grads_in.pop(mb)
        self.weight_grads[mb] = self.worker.input_backward(root, grad, h_in)

    def _do_W(self, mb: int) -> tuple[int, int]:
        self.weight_grads.pop(mb)()
        return 0, 0

    def _do_STEP(self, mb: None) -> tuple[int, int]:
        self.worker.optimizer_step()
        if self.stash is not None:
            self.stash.stepped()
        return 0, 0

    def _after_step(self) -> None:
        steps = self.worker.steps_done
        for step in sorted(k for k in self._step_losses if k < steps):
            losses = self._step_losses.pop(step)
            if self.loss_log is not None:
                self.loss_log.append(step, losses)
        self.on_step(steps)
        self.pace.at_step(steps)
        ft = self.ft
        if ft is None:
            return
        ft.injection.post_step(steps)  # dies here: after the update, before it is durable
        if ft.replay is not None:  # drop what the downstream's durable checkpoint covers
            cursor = protocol.get_int(ft.store, protocol.checkpoint_cursor(self.stage + 1), -1)
            if cursor >= 0:
                ft.replay.prune_below(cursor)
            ft.store.set(protocol.buffer_floor(self.stage), str(ft.replay.floor))

    def _do_CKPT(self, mb: None) -> tuple[int, int]:
        """Commit a checkpoint of the step just taken (the schedule puts CKPT after every n-th STEP)."""
        ft = self.ft
        if ft is None:
            return 0, 0  # a schedule built with checkpoints, run without fault tolerance
        steps = self.worker.steps_done
        cursor = steps * self.worker.microbatches
        tracking = self.worker.tracking
        ckpt = capture(params=self.worker.chunk.trainable_state(), optimizer=self.worker.optimizer,
                       step=steps, cursor=cursor,
                       extra_tensors=tracking.checkpoint_tensors(steps) if tracking is not None else None,
                       extra_meta={"replay_floor": ft.replay.floor if ft.replay else None,
                                   "generation": ft.generation})
        ft.checkpoints.save(ckpt, before_manifest=lambda: ft.injection.mid_checkpoint(steps))
        ft.store.set(protocol.checkpoint_cursor(self.stage), str(cursor))
        return 0, 0

    # ---- sends ----------------------------------------------------------------------------
    def _send(self, link: Link, tensor: torch.Tensor, *, kind: int, mb: int) -> int:
        """Send once per link generation: a retry after a relink that already resent `mb` is a no-op."""
        if self.ledger.already_sent(link.generation, kind, mb):
            return 0
        self.sends.append((link.send(tensor, kind=kind, microbatch=mb), tensor))
        self.ledger.record(link.generation, kind, mb)
        while len(self.sends) > max(1, self.depth) * 2:
            work, _ = self.sends[0]
            work.wait()
            self.sends.pop(0)
        return tensor.numel() * tensor.element_size()

    def _drain_sends(self) -> None:
        while self.sends:
            work, _ = self.sends[0]
            work.wait()
            self.sends.pop(0)

    def _do_SF(self, mb: int) -> tuple[int, int]:
        sent = self._send_forward(mb)
        if self.forward_only:  # no backward comes for it: what it held goes once sent
            del self.held[mb]
        return sent, 0

    def _send_forward(self, mb: int) -> int:
        h_out = self.held[mb][1]
        h = h_out.detach().contiguous() if self.bp else self.worker.outgoing(self.data(mb), h_out)
        ft = self.ft
        if ft is not None and ft.replay is not None:
            ft.replay.add(mb, h)
        if ft is not None and mb < ft.skip_sends_below:  # replay: the downstream stage already has this one
            self.next_hidden = max(self.next_hidden, mb + 1)
            return 0
        if self.wiring.flow_out is not None:
            self.wiring.flow_out.wait_for_room(mb, self.poll)
        self.next_hidden = max(self.next_hidden, mb + 1)
        return self._send(self.next, h, kind=HIDDEN, mb=mb)

    def _do_SB(self, mb: int) -> tuple[int, int]:
        sent = self._send(self.prev, self.grads_out[mb].contiguous(), kind=GRAD, mb=mb)
        del self.grads_out[mb]  # only once sent: a retry finds it still there
        return sent, 0

    def _record_loss(self, mb: int, loss: StepLoss) -> None:
        step = mb // self.worker.microbatches
        self._step_losses.setdefault(step, []).append(loss)
        self.loss_to_report = loss.total

    # ---- local recovery (ZeroLock) -----------------------------------------------------------
    def current_generation(self, link: int) -> int:
        return protocol.get_int(self.ft.store, protocol.link_generation(link), 0)

    def _wait_for_rebuild(self, *, tried: tuple[str, int] | None) -> tuple[str, int]:
        """A link broke (its peer died). Wait for the coordinator to announce the replacement: a
        generation newer than the broken link's and than the one a failed relink `tried`."""
        ft, t0 = self.ft, time.monotonic()
        while True:
            if ft.store.check([protocol.STOP]):
                raise StopRequested()
            for side, link in (("prev", self.prev), ("next", self.next)):
                seen = max(link.generation, tried[1] if tried and tried[0] == side else 0) if link else 0
                if link is not None and self.current_generation(link.link) > seen:
                    return side, self.current_generation(link.link)
            if time.monotonic() - t0 > RELINK_WAIT_S:
                raise TimeoutError(f"stage {self.stage}: a link broke and no replacement was announced "
                                   f"within {RELINK_WAIT_S:g} s")
            time.sleep(0.01)

    def _raise_if_replaced_again(self, side: str, gen: int) -> None:
        link = self.prev if side == "prev" else self.next
        protocol.raise_if_rebuilt(self.ft.store, link=link.link, generation=gen, side=side)

    def _relink(self, side: str, gen: int) -> None:
        ft = self.ft
        t0 = time.monotonic_ns()
        resent, resends = 0, None
        if side == "prev":
            # We are downstream of a replaced stage: ask for everything we have not received.
            dropped = sorted(mb for (k, mb) in self.posted if k == Kind.RF)
            for mb in dropped:  # still in _unreceived: the next _prepost posts them on the new link
                del self.posted[(Kind.RF, mb)]
            ahead = next((a for a in self._receives_ahead() if a.kind == Kind.RF), None)
            need = ahead.microbatch if ahead is not None else 1 << 40
            ft.store.set(protocol.need(self.prev.link, gen), str(need))
            self.wiring.prev = self.wiring.make_link("prev", gen)
            self._prepost()
        else:
            # We are upstream of a replaced stage: resend what it needs from the replay buffer.
            need = int(protocol.wait_for(ft.store, protocol.need(self.next.link, gen), timeout_s=RELINK_WAIT_S,
                                         what=f"stage {self.stage + 1}'s replacement to say what it needs",
                                         abandon=lambda: self._raise_if_replaced_again("next", gen)))
            self.wiring.next = self.wiring.make_link("next", gen)
            self.sends.clear()  # sends on the dead link are gone; the buffer has their tensors
            # The new downstream process has nothing from `need` on, whatever its predecessor had: a
            # replacement still replaying must now send what it skipped as already delivered (a run
            # once stalled so: stage 0's replacement skipped micro-batches 13-14 for a stage 1 that
            # had them, and stage 1 then died and came back needing them from 8).
            ft.skip_sends_below = need
            if ft.replay is None or (need < self.next_hidden and need < ft.replay.floor):
                raise BufferExhausted(f"stage {self.stage}: the replay buffer starts at micro-batch "
                                      f"{ft.replay.floor if ft.replay else '?'} but stage {self.stage + 1} "
                                      f"needs {need}")
            resends = []
            for mb, h in ft.replay.between(need, self.next_hidden):
                resends.append([mb, self._send(self.next, h, kind=HIDDEN, mb=mb)])
                resent += resends[-1][1]
            self.counters.bytes_resent += resent
            ft.store.add(protocol.resent_bytes(self.stage), resent)
        self._record(Kind.RELINK, None, t0, time.monotonic_ns(), resent, 0, resends=resends)
