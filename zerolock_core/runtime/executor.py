"""Runs one stage's action list literally, emitting an event per action.

Receives are preposted (`irecv`) up to the in-flight depth, so compute waits only on the one
micro-batch it needs; sends are asynchronous and their buffers are kept alive until completed.
With fault tolerance on, the stage checkpoints after every N-th optimizer step, keeps the hidden
states it sent in a replay buffer, and — for ZeroLock — survives a neighbour's failure by
rebuilding the link to its replacement instead of dying.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..schedule import Action, Kind
from ..stage_worker import StageWorker, StepLoss
from ..telemetry import ActivationMeter, Event, EventWriter
from .checkpoint import capture
from .links import GRAD, HIDDEN, FlowControl, Link
from .recovery_context import BufferExhausted, FaultTolerance, LinkRebuilt, need_key, wait_key
from .weight_stash import WeightStash


class StopRequested(Exception):
    """The coordinator asked this stage to stop."""


class MemoryBudgetExceeded(RuntimeError):
    """Measured activations went over --memory-budget (the CPU stand-in for a CUDA OOM)."""


@dataclass(kw_only=True)
class StageCounters:
    bytes_sent: int = 0
    bytes_received: int = 0
    bytes_resent: int = 0
    busy_ns: int = 0
    peak_inflight: int = 0
    first_ns: int | None = None
    last_ns: int = 0
    losses: dict[int, list[StepLoss]] = field(default_factory=dict)  # step -> per micro-batch


COMPUTE = {Kind.F, Kind.L, Kind.B, Kind.STEP, Kind.CKPT, Kind.REPLAY}


class Executor:
    def __init__(self, *, stage: int, stages: int, method: str, worker: StageWorker,
                 microbatch_data: Callable[[int], dict[str, torch.Tensor]], hidden_shape: tuple[int, ...],
                 prev: Link | None, next: Link | None, flow_in: FlowControl | None, flow_out: FlowControl | None,
                 events: EventWriter, poll: Callable[[], None], on_step: Callable[[int], None],
                 device: torch.device, depth: int = 2, memory_budget_bytes: int = 0,
                 ft: FaultTolerance | None = None, make_link: Callable[[str, int], Link] | None = None,
                 replay_until: int = 0, skip_sends_below: int = 0) -> None:
        self.stage, self.stages, self.method = stage, stages, method
        self.worker, self.data, self.hidden_shape = worker, microbatch_data, hidden_shape
        self.prev, self.next, self.flow_in, self.flow_out = prev, next, flow_in, flow_out
        self.events, self.poll, self.on_step = events, poll, on_step
        self.device, self.depth = device, depth
        self.memory_budget_bytes = memory_budget_bytes
        self.ft, self.make_link = ft, make_link
        self.replay_until = replay_until  # micro-batches below this are a replacement's replay
        self.skip_sends_below = skip_sends_below  # the downstream stage already has these
        self.bp = method != "zerolock"
        self.meter = ActivationMeter([*worker.chunk.parameters(), *worker.chunk.buffers()])
        self.stash = WeightStash(worker.chunk, meter=self.meter) if method == "pipedream" else None
        self.counters = StageCounters()
        self.held: dict[int, tuple[torch.Tensor | None, torch.Tensor]] = {}  # mb -> (h_in, h_out)
        self.received: dict[int, torch.Tensor] = {}  # mb -> h_in (received, not yet forwarded)
        self.grads_in: dict[int, torch.Tensor] = {}
        self.grads_out: dict[int, torch.Tensor] = {}
        self.posted: dict[tuple[Kind, int], tuple[object, torch.Tensor]] = {}
        self.sends: list[tuple[object, torch.Tensor]] = []
        self.next_hidden = 0  # the next micro-batch whose hidden state goes downstream
        self.loss_to_report: float | None = None  # goes out on the next event (live loss curves)

    # ---- the loop -------------------------------------------------------------------------
    def run(self, actions: tuple[Action, ...]) -> None:
        self._recv_plan = [a for a in actions if a.kind in (Kind.RF, Kind.RB)]
        self._next_recv = 0
        if actions:
            first = next((a.microbatch for a in actions if a.microbatch is not None), 0)
            self.next_hidden = first
        self._guarded(self._prepost)
        for action in actions:
            self._guarded(self.poll)
            t0 = time.monotonic_ns()
            sent, recv = self._guarded(lambda: getattr(self, f"_do_{action.kind.value}")(action.microbatch))
            t1 = time.monotonic_ns()
            self._record(action.kind.value if not self._is_replay(action) else "REPLAY", action.microbatch,
                         t0, t1, sent, recv, compute=action.kind in COMPUTE)
            if action.kind == Kind.STEP:
                self._after_step()
        self._guarded(self._drain_sends)

    def _is_replay(self, action: Action) -> bool:
        return action.kind == Kind.F and action.microbatch is not None and action.microbatch < self.replay_until

    def _guarded(self, fn):
        """Runs fn; a broken link (ZeroLock with fault tolerance) is rebuilt and fn retried."""
        while True:
            try:
                return fn()
            except LinkRebuilt as rebuilt:
                self._relink(rebuilt.side, rebuilt.gen)
            except RuntimeError as err:
                if isinstance(err, MemoryBudgetExceeded) or self.ft is None or not self.ft.local_recovery:
                    raise
                side = self._wait_for_rebuild(err)
                self._relink(*side)

    def _record(self, kind: str, mb: int | None, t0: int, t1: int, sent: int, recv: int, *, compute: bool) -> None:
        c = self.counters
        if compute:
            c.busy_ns += t1 - t0
        c.first_ns = t0 if c.first_ns is None else c.first_ns
        c.last_ns = t1
        c.bytes_sent += sent
        c.bytes_received += recv
        c.peak_inflight = max(c.peak_inflight, len(self.held))
        self.events.write(Event(stage=self.stage, kind=kind, mb=mb, t0=t0, t1=t1,
                                act_bytes=self.meter.current_bytes, inflight=len(self.held), sent=sent,
                                recv=recv, step=self.worker.steps_done,
                                gen=self.ft.generation if self.ft else 0, loss=self.loss_to_report))
        self.loss_to_report = None
        if self.memory_budget_bytes and self.meter.peak_bytes > self.memory_budget_bytes:
            raise MemoryBudgetExceeded(
                f"stage {self.stage}: activations peaked at {self.meter.peak_bytes / 2**20:.2f} MiB during "
                f"{kind}{'' if mb is None else mb}, over the memory budget of "
                f"{self.memory_budget_bytes / 2**20:.2f} MiB")

    # ---- receives -------------------------------------------------------------------------
    def _prepost(self) -> None:
        """Post receives for the next `depth` receive actions not yet posted."""
        while self._next_recv < len(self._recv_plan) and len(self.posted) < max(1, self.depth):
            a = self._recv_plan[self._next_recv]
            buf = torch.empty(self.hidden_shape, device=self.device)
            link, kind = (self.prev, HIDDEN) if a.kind == Kind.RF else (self.next, GRAD)
            self.posted[(a.kind, a.microbatch)] = (link.recv(buf, kind=kind, microbatch=a.microbatch), buf)
            self._next_recv += 1

    def _wait_recv(self, kind: Kind, mb: int) -> torch.Tensor:
        if (kind, mb) not in self.posted:
            self._prepost()
        work, buf = self.posted[(kind, mb)]
        work.wait()
        del self.posted[(kind, mb)]
        self._prepost()
        return buf

    def _do_RF(self, mb: int) -> tuple[int, int]:
        h = self._wait_recv(Kind.RF, mb)
        self.received[mb] = h
        return 0, h.numel() * h.element_size()

    def _do_RB(self, mb: int) -> tuple[int, int]:
        g = self._wait_recv(Kind.RB, mb)
        self.grads_in[mb] = g
        return 0, g.numel() * g.element_size()

    # ---- compute --------------------------------------------------------------------------
    def _do_F(self, mb: int) -> tuple[int, int]:
        batch = self.data(mb)
        if self.stage == 0:
            h_in, x = None, batch["input_ids"]
        else:
            h_in = self.received.pop(mb)
            if self.flow_in is not None:
                self.flow_in.consumed(mb)
            if self.bp:
                h_in.requires_grad_(True)
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
            loss = self.worker.local_backward(self.data(mb), h_in, h_out)
        self._record_loss(mb, loss)
        if self.ft is not None:
            self.ft.store.set(f"stage/{self.stage}/mb_done", str(mb + 1))
        return 0, 0

    def _do_B(self, mb: int) -> tuple[int, int]:
        h_in, h_out = self.held.pop(mb)
        if self.stage == self.stages - 1:
            self._record_loss(mb, self.worker.bp_loss_backward(self.data(mb), h_out))
        else:
            self.worker.bp_backward(h_out, self.grads_in.pop(mb))
        if self.stash is not None:
            self.stash.after_backward(mb)
        if h_in is not None:
            self.grads_out[mb] = h_in.grad
        return 0, 0

    def _do_STEP(self, mb: None) -> tuple[int, int]:
        self.worker.optimizer_step()
        if self.stash is not None:
            self.stash.stepped()
        return 0, 0

    def _after_step(self) -> None:
        steps = self.worker.steps_done
        self.on_step(steps)
        ft = self.ft
        if ft is None:
            return
        ft.maybe_inject("post-step", steps)  # dies here: after the update, before it is durable
        if ft.replay is not None:  # drop what the downstream's durable checkpoint covers
            key = f"ckpt/{self.stage + 1}/cursor"
            if ft.store.check([key]):
                ft.replay.prune_below(int(ft.store.get(key)))
            ft.store.set(f"buffer/{self.stage}/floor", str(ft.replay.floor))
        if ft.ckpt_every and steps % ft.ckpt_every == 0:
            t0 = time.monotonic_ns()
            cursor = steps * self.worker.microbatches
            ckpt = capture(params=self.worker.chunk.trainable_state(), optimizer=self.worker.optimizer,
                           step=steps, cursor=cursor,
                           extra_meta={"replay_floor": ft.replay.floor if ft.replay else None,
                                       "generation": ft.generation, "losses": self.losses_json()})
            ft.checkpoints.save(ckpt, before_manifest=lambda: ft.maybe_inject("mid-ckpt", steps))
            ft.store.set(f"ckpt/{self.stage}/cursor", str(cursor))
            ft.store.set(f"ckpt/{self.stage}/step", str(steps))
            self._record("CKPT", None, t0, time.monotonic_ns(), 0, 0, compute=True)

    def _do_CKPT(self, mb: None) -> tuple[int, int]:
        return 0, 0  # checkpoints are taken after STEP (see _after_step)

    # ---- sends ----------------------------------------------------------------------------
    def _send(self, link: Link, tensor: torch.Tensor, *, kind: int, mb: int) -> int:
        self.sends.append((link.send(tensor, kind=kind, microbatch=mb), tensor))
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
        h = self.held[mb][1].detach().contiguous()
        if self.ft is not None and self.ft.replay is not None and mb >= self.next_hidden:
            self.ft.replay.add(mb, h)
        if mb < self.skip_sends_below:  # replay: the downstream stage already received this one
            self.next_hidden = mb + 1
            return 0, 0
        if self.flow_out is not None:
            self.flow_out.wait_for_room(mb, self.poll)
        self.next_hidden = mb + 1
        return self._send(self.next, h, kind=HIDDEN, mb=mb), 0

    def _do_SB(self, mb: int) -> tuple[int, int]:
        return self._send(self.prev, self.grads_out.pop(mb).contiguous(), kind=GRAD, mb=mb), 0

    def losses_json(self) -> dict[str, list[dict]]:
        return {str(step): [{"total": l.total, "task": l.task, "consistency": l.consistency} for l in ls]
                for step, ls in sorted(self.counters.losses.items())}

    def restore_losses(self, losses: dict[str, list[dict]]) -> None:
        """A restored stage keeps the loss curve of the steps its checkpoint covers."""
        for step, ls in losses.items():
            self.counters.losses[int(step)] = [StepLoss(total=x["total"], task=x["task"],
                                                        consistency=x["consistency"]) for x in ls]

    def _record_loss(self, mb: int, loss: StepLoss) -> None:
        step = mb // self.worker.microbatches
        self.counters.losses.setdefault(step, []).append(loss)
        self.loss_to_report = loss.total

    # ---- local recovery (ZeroLock) -----------------------------------------------------------
    def _wait_for_rebuild(self, err: RuntimeError) -> tuple[str, int]:
        """A link broke (its peer died). Wait for the coordinator to announce the replacement."""
        from .recovery_context import link_gen_key
        ft, t0 = self.ft, time.monotonic()
        while True:
            self.poll_stop_only()
            for side, link in (("prev", self.prev), ("next", self.next)):
                if link is None:
                    continue
                key = link_gen_key(link.link)
                if ft.store.check([key]) and int(ft.store.get(key)) > link.generation:
                    return side, int(ft.store.get(key))
            if time.monotonic() - t0 > 120:
                raise err
            time.sleep(0.01)

    def poll_stop_only(self) -> None:
        from .recovery_context import STOP_KEY
        if self.ft.store.check([STOP_KEY]):
            raise StopRequested()

    def _relink(self, side: str, gen: int) -> None:
        ft = self.ft
        t0 = time.monotonic_ns()
        resent = 0
        if side == "prev":
            # We are downstream of a replaced stage: ask for everything we have not received.
            dropped = sorted(mb for (k, mb) in self.posted if k == Kind.RF)
            for mb in dropped:
                del self.posted[(Kind.RF, mb)]
            need = dropped[0] if dropped else (self._recv_plan[self._next_recv].microbatch
                                               if self._next_recv < len(self._recv_plan) else 1 << 40)
            if dropped:
                self._next_recv = next(i for i, a in enumerate(self._recv_plan)
                                       if a.kind == Kind.RF and a.microbatch == dropped[0])
            ft.store.set(need_key(self.prev.link, gen), str(need))
            self.prev = self.make_link("prev", gen)
            self._prepost()
        else:
            # We are upstream of a replaced stage: resend what it needs from the replay buffer.
            need = int(wait_key(ft.store, need_key(self.next.link, gen)))
            self.next = self.make_link("next", gen)
            self.sends.clear()  # sends on the dead link are gone; the buffer has their tensors
            if ft.replay is None or (need < self.next_hidden and need < ft.replay.floor):
                raise BufferExhausted(f"stage {self.stage}: the replay buffer starts at micro-batch "
                                      f"{ft.replay.floor if ft.replay else '?'} but stage {self.stage + 1} "
                                      f"needs {need}")
            for mb, h in list(ft.replay.entries.items()):
                if need <= mb < self.next_hidden:
                    resent += self._send(self.next, h, kind=HIDDEN, mb=mb)
            self.counters.bytes_resent += resent
            ft.store.add(f"recovery/resent_bytes/{self.stage}", resent)
        self._record("RELINK", None, t0, time.monotonic_ns(), resent, 0, compute=False)
