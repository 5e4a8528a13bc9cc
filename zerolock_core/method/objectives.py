"""The local objective of a chunk: α·CE(task) + (1 − α)·KL(consistency with the previous chunk).

All tensors here are logits at the answer positions Ω only ([|Ω|, V]); the readout never
materialises S × V logits. The previous chunk's distribution is a stop-gradient target.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(kw_only=True, frozen=True)
class LocalLoss:
    total: torch.Tensor  # what is backpropagated
    task: torch.Tensor  # CE over Ω
    consistency: torch.Tensor | None  # KL over Ω (None on the first chunk)


def _full_precision(x: torch.Tensor) -> torch.Tensor:
    """Losses in at least fp32 (bf16/fp16 logits are upcast; fp64 stays fp64)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def task_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean token-level cross-entropy over Ω (Eq. 4 with negative entropy as ψ, sign fixed:
    it is minimised, i.e. KL(onehot(y) ‖ p) up to a constant)."""
    return F.cross_entropy(_full_precision(logits), targets)


def consistency_kl(logits: torch.Tensor, prev_logits: torch.Tensor, direction: str) -> torch.Tensor:
    """Mean over Ω of KL(p_k ‖ p_{k−1}) (`reverse`, the paper's Eq. 5) or KL(p_{k−1} ‖ p_k)
    (`forward`, the authors' public code). p_{k−1} is detached: no gradient reaches chunk k−1."""
    log_p = F.log_softmax(_full_precision(logits), dim=-1)
    log_q = F.log_softmax(_full_precision(prev_logits.detach()), dim=-1)
    if direction == "reverse":
        kl = (log_p.exp() * (log_p - log_q)).sum(-1)
    elif direction == "forward":
        kl = (log_q.exp() * (log_q - log_p)).sum(-1)
    else:
        raise ValueError(f"consistency direction {direction!r} is not 'reverse' or 'forward'")
    return kl.mean()


def local_loss(*, logits: torch.Tensor, targets: torch.Tensor, prev_logits: torch.Tensor | None,
               alpha: float, direction: str) -> LocalLoss:
    """Eq. (3). The first chunk has nothing upstream to agree with, so its loss is the task term
    alone (weight 1; K = 1 with any α is then exactly ordinary fine-tuning)."""
    task = task_cross_entropy(logits, targets)
    if prev_logits is None:
        return LocalLoss(total=task, task=task, consistency=None)
    cons = consistency_kl(logits, prev_logits, direction)
    return LocalLoss(total=alpha * task + (1.0 - alpha) * cons, task=task, consistency=cons)
