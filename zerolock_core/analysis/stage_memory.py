"""What each stage holds for one micro-batch, measured: the bytes of its weights (its layers, its
readout's layers — a `top:N` readout's copy of N layers included — and the shared head it keeps a copy
of) and the activation bytes autograd saves for that micro-batch's backward (ActivationMeter).

The schedule decides how many micro-batches a stage holds at once (ZeroLock: one; 1F1B: up to K − k);
this is the per-micro-batch figure every schedule multiplies. A chunk that does not train (the earlier
chunks of `terminal`) runs under `no_grad` and saves nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..train.stage_worker import StageWorker
from ..telemetry.activation_meter import ActivationMeter


@dataclass(frozen=True, kw_only=True)
class StageMemory:
    weight_bytes: int
    activation_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.activation_bytes


def _weight_bytes(worker: StageWorker) -> int:
    tensors = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
               for t in [*worker.chunk.parameters(), *worker.chunk.buffers()]}
    return sum(tensors.values())


def stage_memory(workers: list[StageWorker], mb: dict[str, torch.Tensor], *, backprop: bool) -> list[StageMemory]:
    """Run one micro-batch as the arm trains it (`backprop`: forward through every chunk, then one
    backward; otherwise each chunk's forward and local loss in turn) and measure every chunk apart.
    Gradients are cleared afterwards: the weights are not changed."""
    meters = [ActivationMeter([*w.chunk.parameters(), *w.chunk.buffers()]) for w in workers]
    for w in workers:
        w.chunk.zero_grad(set_to_none=True)
    x, h_in, prev_rows = mb["input_ids"], None, None
    for k, (w, meter) in enumerate(zip(workers, meters)):
        with meter.measuring():
            h_out = w.forward(mb, x)
            if backprop:
                if k + 1 == len(workers):
                    w.bp_loss_backward(mb, h_out)
                x = h_out
                continue
            message = w.outgoing(mb, h_out) if k + 1 < len(workers) else None
            w.local_backward(mb, h_in, h_out, prev_rows)
        if message is not None:
            h_in, prev_rows = workers[k + 1].incoming(mb, message, tuple(h_out.shape))
            x = h_in
    for w in workers:
        w.chunk.zero_grad(set_to_none=True)
    return [StageMemory(weight_bytes=_weight_bytes(w), activation_bytes=m.peak_bytes)
            for w, m in zip(workers, meters)]
