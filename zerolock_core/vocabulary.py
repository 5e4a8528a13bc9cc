"""The telemetry vocabulary: every kind of bar that appears on a stage's lane, and what it counts as.

One table for the runtime (metrics.json), the dashboard and the benchmarks. A stage is **busy**
during compute (its training work, replayed micro-batches included); communication, waits,
recovery (restoring a checkpoint, rebuilding a link) and start-up are not busy: busy / span is the
active fraction, 1 − mean busy / makespan the bubble. Pure Python: the schedule simulator and the
app import it without torch.
"""
from __future__ import annotations

from enum import StrEnum


class Category(StrEnum):
    COMPUTE = "compute"
    COMMUNICATION = "communication"
    WAIT = "wait"
    RECOVERY = "recovery"
    LIFECYCLE = "lifecycle"


KIND_CATEGORY: dict[str, Category] = {
    "F": Category.COMPUTE,  # forward of a micro-batch
    "L": Category.COMPUTE,  # ZeroLock local step: readout + local loss + local backward
    "B": Category.COMPUTE,  # backward (BP methods)
    "STEP": Category.COMPUTE,  # optimizer step
    "CKPT": Category.COMPUTE,  # checkpoint write
    "REPLAY": Category.COMPUTE,  # a forward replayed after a recovery
    "SF": Category.COMMUNICATION,  # send the hidden state downstream
    "SB": Category.COMMUNICATION,  # send the gradient upstream
    "RF": Category.WAIT,  # wait for the hidden state from upstream
    "RB": Category.WAIT,  # wait for the gradient from downstream
    "WAIT": Category.WAIT,  # any other wait
    "RESTORE": Category.RECOVERY,  # load a checkpoint (a restarted stage)
    "RELINK": Category.RECOVERY,  # rebuild a link to a restarted neighbour, resend what it lost
    "STARTUP": Category.LIFECYCLE,  # spawn to first action (telemetry/lifecycle.py)
}


def category(kind: str) -> Category | None:
    """None for a kind this table does not know (a newer engine's)."""
    return KIND_CATEGORY.get(kind)


def kinds_in(cat: Category) -> frozenset[str]:
    return frozenset(k for k, c in KIND_CATEGORY.items() if c == cat)


BUSY_KINDS = kinds_in(Category.COMPUTE)


def is_busy(kind: str) -> bool:
    return kind in BUSY_KINDS
