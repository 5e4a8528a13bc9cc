"""What one pipeline stage does to its chunk: forward, local step, BP backward, optimizer step.

The single-process reference trainers and the multi-process executors both call exactly these
methods, so a pipeline run and a reference run perform the same floating-point operations.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from . import boundary
from .chunks import Chunk
from .objectives import LocalLoss, local_loss, task_cross_entropy


@dataclass(kw_only=True, frozen=True)
class StepLoss:
    total: float
    task: float
    consistency: float | None


def answer_positions(mb: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Ω as a [B, S] boolean mask and the target token at each position in Ω."""
    labels = mb["labels"]
    omega = labels != -100
    return omega, labels[omega]


class StageWorker:
    def __init__(self, *, chunk: Chunk, alpha: float, consistency: str, microbatches: int,
                 lr: float, weight_decay: float, alpha_at: Callable[[int], float] | None = None) -> None:
        self.chunk = chunk
        self.alpha = alpha
        self.alpha_at = alpha_at  # α by optimizer step (an α ramp); None = the constant `alpha`
        self.consistency = consistency
        self.microbatches = microbatches
        self.params = [p for p in chunk.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=lr, weight_decay=weight_decay, foreach=False)
        self.steps_done = 0

    def forward(self, mb: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return self.chunk(x, mb["attention_mask"])

    # ---- what crosses the boundary (ZeroLock) ----------------------------------------------
    def outgoing(self, mb: dict[str, torch.Tensor], h_out: torch.Tensor) -> torch.Tensor:
        """The message to the next stage, detached: the hidden state, and with a readout adapter
        also this chunk's adapted rows at Ω, so the next chunk's target is this chunk's readout."""
        h = h_out.detach()
        rows = self.chunk.readout_rows(h, answer_positions(mb)[0])
        return boundary.pack(h, rows)

    def incoming(self, mb: dict[str, torch.Tensor], message: torch.Tensor,
                 hidden_shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(h_in, the upstream's adapted rows or None) out of a message from `outgoing`."""
        return boundary.unpack(message, hidden_shape=hidden_shape, rows=self.upstream_rows(mb))

    def upstream_rows(self, mb: dict[str, torch.Tensor]) -> int:
        """How many adapted rows the upstream ships (0 without readout adapters: the same config
        gives every chunk one, or none)."""
        return int(answer_positions(mb)[0].sum()) if self.chunk.readout_adapter is not None else 0

    def local_backward(self, mb: dict[str, torch.Tensor], h_in: torch.Tensor | None,
                       h_out: torch.Tensor, prev_rows: torch.Tensor | None = None) -> StepLoss:
        """ZeroLock: readout + local loss + backward into this chunk's parameters only.
        `h_in` is the detached upstream hidden state (None on chunk 0); `prev_rows` the upstream's
        adapted readout rows when chunks have readout adapters."""
        omega, targets = answer_positions(mb)
        prev = None if h_in is None else self.chunk.upstream_readout(h_in, omega, prev_rows)
        loss: LocalLoss = local_loss(logits=self.chunk.readout(h_out, omega), targets=targets,
                                     prev_logits=prev, alpha=self.current_alpha(), direction=self.consistency)
        (loss.total / self.microbatches).backward()
        return _detach(loss)

    def current_alpha(self) -> float:
        return self.alpha if self.alpha_at is None else self.alpha_at(self.steps_done)

    def bp_loss_backward(self, mb: dict[str, torch.Tensor], h_out: torch.Tensor) -> StepLoss:
        """Last stage of a BP pipeline: the ordinary task loss at the final readout."""
        omega, targets = answer_positions(mb)
        loss = task_cross_entropy(self.chunk.readout(h_out, omega), targets)
        (loss / self.microbatches).backward()
        value = float(loss.detach())
        return StepLoss(total=value, task=value, consistency=None)

    def bp_backward(self, h_out: torch.Tensor, grad_out: torch.Tensor) -> None:
        """Inner stage of a BP pipeline: backward of the received output gradient."""
        h_out.backward(grad_out)

    def optimizer_step(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.steps_done += 1


def _detach(loss: LocalLoss) -> StepLoss:
    return StepLoss(total=float(loss.total.detach()), task=float(loss.task.detach()),
                    consistency=None if loss.consistency is None else float(loss.consistency.detach()))
