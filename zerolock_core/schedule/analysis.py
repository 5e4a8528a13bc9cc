"""Static properties of a schedule read off its action order (no timing).

* activations: a micro-batch's activations are held on a stage from its ``F``
  (or ``REPLAY``) until its ``B`` (BP methods; ``W`` where the backward is split) or ``L`` (zerolock)
  on that stage (``Schedule.release_kinds``).
* weight versions: the version a stage uses for an action is the number of
  ``STEP`` actions the stage executed before it. PipeDream-style weight stashing
  keeps, for every micro-batch between its forward and its backward, the version
  its forward used, so its backward sees exactly the same weights.
"""

from __future__ import annotations

from .action import Action, Kind
from .schedule import Schedule

_HOLD = frozenset({Kind.F, Kind.REPLAY})
_BACKWARDS = frozenset({Kind.B, Kind.W, Kind.L})  # what must see the forward's weight version


def inflight_peak(schedule: Schedule, stage: int) -> int:
    """Max number of micro-batches whose activations are held at once on ``stage``."""
    held: set[int] = set()
    peak = 0
    for a in schedule.for_stage(stage):
        if a.kind in _HOLD:
            held.add(a.microbatch)
            peak = max(peak, len(held))
        elif a.kind in schedule.release_kinds:
            held.discard(a.microbatch)
    return peak


def _version_at(schedule: Schedule, stage: int, microbatch: int, kinds: frozenset[Kind], what: str) -> int:
    version = 0
    for a in schedule.for_stage(stage):
        if a.kind is Kind.STEP:
            version += 1
        elif a.kind in kinds and a.microbatch == microbatch:
            return version
    raise ValueError(f"stage {stage} has no {what} of micro-batch {microbatch}")


def weight_version_of_forward(schedule: Schedule, stage: int, microbatch: int) -> int:
    """STEPs that ``stage`` executed before its ``F`` of ``microbatch``."""
    return _version_at(schedule, stage, microbatch, frozenset({Kind.F}), "forward (F)")


def weight_version_of_backward(schedule: Schedule, stage: int, microbatch: int) -> int:
    """STEPs that ``stage`` executed before its backward (``B``, or ``L`` for zerolock) of ``microbatch``."""
    return _version_at(schedule, stage, microbatch, schedule.release_kinds, "backward (B, W or L)")


def max_stashed_versions(schedule: Schedule, stage: int) -> int:
    """Distinct weight versions ``stage`` must keep alive at once.

    At every point: the current version plus the versions used by forwards whose
    backward has not run yet. 1 means no stashing (gpipe, 1f1b, zerolock).
    For pipedream with ``d = K - s - 1`` and ``m`` micro-batches per window it is
    at most ``1 + ceil(d / m)`` (so at most ``K - s``), with equality once
    ``m * windows >= 2d`` and ``windows >= 1 + ceil(d / m)``: ``K - s`` for ``m = 1``
    (original PipeDream, one update per micro-batch), 2 for ``1 <= d <= m``, 1 on the
    last stage. It never grows with the number of windows.
    """
    version = 0
    pending: dict[int, int] = {}
    peak = 1
    for a in schedule.for_stage(stage):
        if a.kind is Kind.STEP:
            version += 1
        elif a.kind is Kind.F:
            pending[a.microbatch] = version
        elif a.kind in schedule.release_kinds:
            pending.pop(a.microbatch, None)
        peak = max(peak, len(set(pending.values()) | {version}))
    return peak


def stale_backwards(schedule: Schedule, stage: int) -> tuple[Action, ...]:
    """Backwards whose weight version differs from their forward's (they need a stash)."""
    version = 0
    forward_version: dict[int, int] = {}
    stale = []
    for a in schedule.for_stage(stage):
        if a.kind is Kind.STEP:
            version += 1
        elif a.kind is Kind.F:
            forward_version[a.microbatch] = version
        elif a.kind in _BACKWARDS and forward_version.get(a.microbatch, version) != version:
            stale.append(a)
    return tuple(stale)
