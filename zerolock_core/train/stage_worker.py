"""What one pipeline stage does to its chunk: forward, local step, BP backward, optimizer step.

The single-process reference trainers and the multi-process executors both call exactly these
methods, so a pipeline run and a reference run perform the same floating-point operations.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch

from ..method import boundary
from ..method.chunks import Chunk
from ..method.objectives import LocalLoss, local_loss, task_cross_entropy
from ..method.split_backward import WeightGradient, input_gradient

if TYPE_CHECKING:
    from ..config.run_config import RunConfig
    from ..method.tracking import Tracking


@dataclass(kw_only=True, frozen=True)
class StepLoss:
    total: float
    task: float
    consistency: float | None


class LossNotFinite(FloatingPointError):
    """A training chunk's loss became NaN or infinite: training diverged. Raised before its backward, so no
    weight takes a NaN gradient and the run's newest checkpoint is still sound; either runtime then ends the
    run `failed` with this line as its reason (the reference job's fallback, the pipeline's stage error)."""


def answer_positions(mb: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Ω as a [B, S] boolean mask and the target token at each position in Ω."""
    labels = mb["labels"]
    omega = labels != -100
    return omega, labels[omega]


class StageWorker:
    def __init__(self, *, chunk: Chunk, alpha: float, consistency: str, microbatches: int,
                 lr: float, weight_decay: float, alpha_at: Callable[[int], float] | None = None,
                 trains: bool = True, agrees_with_upstream: bool = True) -> None:
        self.chunk = chunk
        self.alpha = alpha
        self.alpha_at = alpha_at  # α by optimizer step (an α ramp); None = the constant `alpha`
        self.consistency = consistency
        self.microbatches = microbatches
        # terminal's chunks before the last, and BP's first --frozen-stages: forward only, their weights as
        # initialised; terminal's readout's task loss is still measured (no gradient), so its curves show
        # what a frozen chunk reads
        self.trains = trains
        self.agrees_with_upstream = agrees_with_upstream  # the consistency term (not terminal's last chunk)
        self.params = [p for p in chunk.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=lr, weight_decay=weight_decay, foreach=False)
        self.steps_done = 0
        # --readout track:P: the last chunk publishes its adapters, a chunk before it loads them, after
        # each optimizer step (method/tracking.py); the runtime attaches it with its board
        self.tracking: Tracking | None = None

    @classmethod
    def of_run(cls, chunk: Chunk, cfg: "RunConfig") -> "StageWorker":
        """The worker of `chunk` in a run of `cfg`: the same in the reference trainer and in a stage process."""
        from ..config.alpha_ramp import alpha_by_step
        from ..methods import chunk_trains, every_chunk_trains

        t, local = cfg.train, every_chunk_trains(cfg.train.method)
        return cls(chunk=chunk, alpha=cfg.objective.alpha_for(chunk.index), consistency=cfg.objective.consistency,
                   microbatches=t.microbatches, lr=t.lr, weight_decay=t.weight_decay,
                   alpha_at=alpha_by_step(cfg, chunk.index), agrees_with_upstream=local,
                   trains=chunk_trains(t.method, last=chunk.is_last, index=chunk.index,
                                       frozen_stages=t.frozen_stages))

    def forward(self, mb: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        with torch.set_grad_enabled(self.trains and torch.is_grad_enabled()):  # a frozen chunk keeps nothing
            return self.chunk(x, mb["attention_mask"])

    # ---- what crosses the boundary (ZeroLock) ----------------------------------------------
    def outgoing(self, mb: dict[str, torch.Tensor], h_out: torch.Tensor) -> torch.Tensor:
        """The message to the next stage, detached: the hidden state, and with a readout adapter
        also this chunk's adapted rows at Ω, so the next chunk's target is this chunk's readout."""
        h = h_out.detach()
        rows = self.chunk.readout_rows(h, answer_positions(mb)[0], mb["attention_mask"])
        return boundary.pack(h, rows)

    def incoming(self, mb: dict[str, torch.Tensor], message: torch.Tensor,
                 hidden_shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(h_in, the upstream's adapted rows or None) out of a message from `outgoing`."""
        return boundary.unpack(message, hidden_shape=hidden_shape, rows=self.upstream_rows(mb))

    def upstream_rows(self, mb: dict[str, torch.Tensor]) -> int:
        """How many readout rows the upstream ships with its hidden state (0 when its readout is the
        plain head, or nothing here reads them)."""
        return int(answer_positions(mb)[0].sum()) if self.chunk.receives_readout else 0

    def local_backward(self, mb: dict[str, torch.Tensor], h_in: torch.Tensor | None,
                       h_out: torch.Tensor, prev_rows: torch.Tensor | None = None) -> StepLoss:
        """ZeroLock: readout + local loss + backward into this chunk's parameters only.
        `h_in` is the detached upstream hidden state (None on chunk 0); `prev_rows` the upstream's
        readout rows when its readout is not the plain head. A chunk that does not train measures
        its loss and keeps its weights."""
        omega, targets = answer_positions(mb)
        with torch.set_grad_enabled(self.trains):
            prev = None if h_in is None or not self.agrees_with_upstream else \
                self.chunk.upstream_readout(h_in, omega, prev_rows)
            loss: LocalLoss = local_loss(logits=self.chunk.readout(h_out, omega, mb["attention_mask"]),
                                         targets=targets, prev_logits=prev, alpha=self.current_alpha(),
                                         direction=self.consistency)
        reported = _detach(loss)
        if self.trains:  # a frozen chunk's measured loss trains nothing
            self.check_finite(reported.total)
            (loss.total / self.microbatches).backward()
        return reported

    def current_alpha(self) -> float:
        return self.alpha if self.alpha_at is None else self.alpha_at(self.steps_done)

    def bp_loss(self, mb: dict[str, torch.Tensor], h_out: torch.Tensor) -> tuple[torch.Tensor, StepLoss]:
        """Last stage of a BP pipeline: what its backward starts from (the ordinary task loss at the final
        readout, over m) and the loss to report."""
        omega, targets = answer_positions(mb)
        loss = task_cross_entropy(self.chunk.readout(h_out, omega, mb["attention_mask"]), targets)
        value = self.check_finite(float(loss.detach()))
        return loss / self.microbatches, StepLoss(total=value, task=value, consistency=None)

    def check_finite(self, loss: float) -> float:
        """`loss`, or LossNotFinite naming the chunk, the step and the usual cure."""
        if not math.isfinite(loss):
            from ..config.run_fields import RUN_FIELDS  # the flag's one definition (config imports this room)

            raise LossNotFinite(f"chunk {self.chunk.index}: the loss is {loss} in step {self.steps_done + 1}: "
                                f"training diverged; start again with a smaller {RUN_FIELDS['lr'].setting.flag}")
        return loss

    def bp_loss_backward(self, mb: dict[str, torch.Tensor], h_out: torch.Tensor) -> StepLoss:
        root, loss = self.bp_loss(mb, h_out)
        root.backward()
        return loss

    def bp_backward(self, h_out: torch.Tensor, grad_out: torch.Tensor) -> None:
        """Inner stage of a BP pipeline: backward of the received output gradient."""
        h_out.backward(grad_out)

    def input_backward(self, root: torch.Tensor, grad_out: torch.Tensor | None,
                       h_in: torch.Tensor | None) -> WeightGradient:
        """B of a split backward (zb-h1): only `h_in`'s gradient now; returns W, the weights' gradient."""
        return input_gradient(root, grad_out, h_in, self.params)

    def optimizer_step(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.steps_done += 1
        if self.tracking is not None:
            self.tracking.after_step(self.steps_done)


def _detach(loss: LocalLoss) -> StepLoss:
    return StepLoss(total=float(loss.total.detach()), task=float(loss.task.detach()),
                    consistency=None if loss.consistency is None else float(loss.consistency.detach()))
