"""How well a chunk's local loss points where backprop would go: the cosine, per chunk, between the
gradient of its local objective and the gradient of the end-to-end task loss, on the same weights (the
LoRA of the chunk's own layers; a readout's weights have no BP gradient to compare with).

A cosine near 1 means the local loss trains the chunk as BP would; near 0, in a direction BP does not
care about (the authors' notes call their KL term's gradient "near-orthogonal" at a boundary). With
K = 1, or on the last chunk at α = 1, the local loss *is* the task loss on that chunk: the cosine is 1.
"""
from __future__ import annotations

import torch

from ..train.reference_trainer import bp_microbatch, zerolock_microbatch
from ..train.stage_worker import StageWorker


def _own_layer_gradients(worker: StageWorker) -> torch.Tensor:
    """The gradient on the chunk's own layers' trainable weights, flat (zero where none arrived)."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p)
             for name, p in worker.chunk.named_parameters() if p.requires_grad and name.startswith("layers.")]
    return torch.cat([g.reshape(-1).double() for g in grads])


def _zero(workers: list[StageWorker]) -> None:
    for w in workers:
        w.chunk.zero_grad(set_to_none=True)


def gradient_cosines(workers: list[StageWorker], mb: dict[str, torch.Tensor]) -> list[float]:
    """cos(∇ local loss of chunk k, ∇ BP task loss) on chunk k's own LoRA, for every chunk, on one
    micro-batch; the workers' weights are not changed (their gradients are cleared before and after)."""
    _zero(workers)
    zerolock_microbatch(workers, mb)
    local = [_own_layer_gradients(w) for w in workers]
    _zero(workers)
    bp_microbatch(workers, mb)
    backprop = [_own_layer_gradients(w) for w in workers]
    _zero(workers)
    return [float(torch.nn.functional.cosine_similarity(a, b, dim=0)) for a, b in zip(local, backprop)]
