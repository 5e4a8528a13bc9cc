"""What the project recommends for a pipeline of K >= 3 stages, in one place: the Run form marks it, the
README and Lesson 5 name it, and its price is read from the frontier study's committed rows of its arm.

The frontier study (docs/results-depth.md, "The frontier"): at K = 4 on SmolLM2-135M, PipeDream (no update
lock, weights one step stale per stage) matches backprop on TREC-6 and Alpaca; with the recompute that halves
1F1B's peak activations it meets the whole goal on Alpaca (BP's NLL, 0.79x 1F1B's time, 0.46x its memory)
and on TREC-6 keeps the accuracy and the memory at 0.92x the time. No ZeroLock readout reaches BP's accuracy
there (its most accurate, `top-lora:last`, is config/readout_spec.DEPTH_READOUT)."""
from __future__ import annotations

from dataclasses import dataclass

from ..method.recompute_layout import MEMORY_HALVING
from .frontier_arms import PIPEDREAM_ARM, RECOMPUTE_ARM

RECOMMENDED_MARK = "★"  # how a page marks it (the Run form's method, the lessons)


@dataclass(kw_only=True, frozen=True)
class Recommendation:
    method: str  # --method
    recompute: str  # the Run form's recompute choice (recompute_layout.MEMORY_HALVING: the layout it names)
    arm: str  # its arm in the frontier study (benchmarks/frontier.py ARMS), whose summary rows give its price
    words: str  # how a page names it


RECOMMENDED_AT_DEPTH = Recommendation(method=PIPEDREAM_ARM, recompute=MEMORY_HALVING, arm=PIPEDREAM_ARM + RECOMPUTE_ARM,
                                      words="PipeDream with the recompute that halves 1F1B's activations")
