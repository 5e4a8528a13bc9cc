"""What an upstream stage sends after its downstream neighbour is replaced: every hidden state the new
process needs, from its `need` on, exactly once — resent from the replay buffer, or sent as computed.

The executor runs for real against a real in-memory store; only the transport is a recording link
(the multi-process cases are tests/test_fault_tolerance.py). The first case is the stall the
fresh-clone CI once hit (`1@3:mid-ckpt` + `0@4:kill`): stage 0's replacement, replaying, skipped the
hidden states its downstream already had; the downstream then died too and came back needing them.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist

from zerolock_core.runtime import protocol
from zerolock_core.runtime.executor import Durability, Executor, Wiring
from zerolock_core.runtime.links import HIDDEN
from zerolock_core.runtime.replay_buffer import ReplayBuffer
from zerolock_core.telemetry import EventWriter

M = 4  # micro-batches per step
SHAPE = (1, 2, 3)


class RecordingLink:
    """A link's sending end that records what it sends (and delivers at once)."""

    def __init__(self, generation: int, log: list[tuple[int, int]]) -> None:
        self.link, self.generation, self.log = 0, generation, log

    def send(self, tensor: torch.Tensor, *, kind: int, microbatch: int):
        assert kind == HIDDEN
        self.log.append((self.generation, microbatch))
        return SimpleNamespace(wait=lambda: None)


def stage0_executor(tmp_path, *, skip_sends_below: int, replay_floor: int, log) -> Executor:
    chunk = SimpleNamespace(parameters=lambda: [], buffers=lambda: [], receives_readout=False)
    worker = SimpleNamespace(chunk=chunk, steps_done=replay_floor // M, microbatches=M,
                             outgoing=lambda batch, h: h.detach())
    store = dist.HashStore()
    durability = Durability(store=store, generation=1, checkpoints=None, injection=None, local_recovery=True,
                            replay=ReplayBuffer(capacity=64, floor=replay_floor),
                            replay_until=skip_sends_below, skip_sends_below=skip_sends_below)
    wiring = Wiring(prev=None, next=RecordingLink(0, log), flow_in=None, flow_out=None,
                    make_link=lambda side, gen: RecordingLink(gen, log))
    return Executor(stage=0, stages=3, method="zerolock", worker=worker, microbatch_data=lambda mb: {},
                    hidden_shape=SHAPE, wiring=wiring, events=EventWriter(lambda i: tmp_path / f"events{i}.jsonl"),
                    poll=lambda: None, on_step=lambda n: None, device=torch.device("cpu"), durability=durability)


def forward_and_send(ex: Executor, microbatches) -> None:
    for mb in microbatches:
        ex.held[mb] = (None, torch.full(SHAPE, float(mb)))
        ex._do_SF(mb)
        ex.held.pop(mb)


CASES = {
    # name: (skip_sends_below at launch, micro-batches sent before the relink, the new process's need,
    #        micro-batches after it) -> what goes out on the new link generation
    "a replacement still replaying loses its downstream, which comes back needing older micro-batches":
        (15, range(8, 13), 8, range(13, 18), list(range(8, 18))),
    "... which comes back needing micro-batches the replacement skipped": (15, range(8, 13), 11, range(13, 18),
                                                                          list(range(11, 18))),
    "a survivor resends from its buffer what the new process needs, then goes on": (0, range(8, 13), 10,
                                                                                    range(13, 16),
                                                                                    list(range(10, 16))),
    "a downstream that needs nothing old gets only the new micro-batches": (0, range(8, 13), 13, range(13, 16),
                                                                           [13, 14, 15]),
}


@pytest.mark.parametrize("skip,before,need,after,expected", CASES.values(), ids=list(CASES))
def test_after_a_relink_every_hidden_state_the_new_downstream_needs_goes_out_once(tmp_path, skip, before, need,
                                                                                 after, expected):
    log: list[tuple[int, int]] = []
    ex = stage0_executor(tmp_path, skip_sends_below=skip, replay_floor=8, log=log)
    forward_and_send(ex, before)
    assert [mb for g, mb in log if g == 0] == [mb for mb in before if mb >= skip]  # skipped: the old one had them
    ex.ft.store.set(protocol.need(0, 1), str(need))
    ex._relink("next", 1)
    forward_and_send(ex, after)
    sent = [mb for g, mb in log if g == 1]
    assert sent == expected
    # and what was sent is what was computed, in order
    assert all(torch.equal(ex.ft.replay.entries[mb], torch.full(SHAPE, float(mb))) for mb in sent)
