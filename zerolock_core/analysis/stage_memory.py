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
    activation_bytes: int  # what one micro-batch keeps for its backward (a recomputed layer: its input)
    # with --recompute: each of the chunk's layers' activations for one micro-batch, measured without it,
    # and what a backward adds back at most while it recomputes one layer (without: () and 0)
    layer_bytes: tuple[int, ...] = ()
    recompute_bytes: int = 0

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
    inputs: list[torch.Tensor] = []
    for k, (w, meter) in enumerate(zip(workers, meters)):
        inputs.append(x)
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
    # one more forward per recomputing chunk; a chunk without --recompute needs none
    layers = [layer_activation_bytes(w, mb, x_in) if w.chunk.recompute_layers else ()
              for w, x_in in zip(workers, inputs)]
    return [StageMemory(weight_bytes=_weight_bytes(w), activation_bytes=m.peak_bytes, layer_bytes=b,
                        recompute_bytes=max(b[:w.chunk.recompute_layers], default=0))
            for w, m, b in zip(workers, meters, layers)]


def layer_activation_bytes(worker: StageWorker, mb: dict[str, torch.Tensor], x: torch.Tensor) -> tuple[int, ...]:
    """The activation bytes each of the chunk's layers saves for one micro-batch, its forward run with a graph
    and without --recompute: what a recomputed layer keeps only the input of, and what its backward holds
    again while it recomputes (the backward frees one layer's before it recomputes the next)."""
    from ..method.chunks import run_layers

    chunk = worker.chunk
    meter = ActivationMeter([*chunk.parameters(), *chunk.buffers()])
    sizes: list[int] = []
    with torch.enable_grad(), meter.measuring():
        h = chunk.embed(x) if chunk.embed is not None else x.detach().requires_grad_(True)
        before = meter.current_bytes
        for _ in run_layers(chunk.layers, h, mb["attention_mask"], config=chunk.config, rotary=chunk.rotary):
            sizes.append(meter.current_bytes - before)
            before = meter.current_bytes
    return tuple(sizes)
