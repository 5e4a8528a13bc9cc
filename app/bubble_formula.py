"""The textbook bubble of each schedule, beside the simulated one, and why the two differ.

Every formula is the idle share of one optimizer step on K equal stages and an ideal link, so it reads
against the simulator's `bubble_fraction` (1 − mean busy / makespan):

* GPipe (Huang et al. 2019): (K − 1) / (m + K − 1).
* 1F1B (Narayanan et al. 2021): (K − 1) / m of the compute, the same idle time: (K − 1) / (m + K − 1) of the step.
* interleaved 1F1B (ibid., v chunks per device): (K − 1) / (v·m) of the compute.
* ZB-H1 (Qi et al. 2023): idle (K − 1)(F + B_in − W) against 1F1B's (K − 1)(F + B), B_in = B − W.
* ZeroLock (this project's count): stage s waits s·F for its first hidden state and ends (K − 1 − s)·F
  before the last stage: idle (K − 1)·F per stage.
* DualPipe-V, and any other schedule: no closed form here.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zerolock_core.schedule import textbook_bubble
from zerolock_core.schedule.dualpipe_v import DUALPIPE_V
from zerolock_core.schedule.interleaved import INTERLEAVED_1F1B

from .schedule_costs import LinkCost, StageCost, uniform

AGREE_PP = 0.5  # percentage points: closer than this, the formula and the simulation agree


@dataclass(kw_only=True, frozen=True)
class Textbook:
    formula: str  # as the page writes it
    value: float  # idle share of the step
    source: str


def _of_step(idle: float, compute: float) -> float:
    return idle / (idle + compute) if idle + compute > 0 else 0.0


def textbook(method: str, *, stages: int, microbatches: int, cost: StageCost, chunks: int = 1) -> Textbook | None:
    """The formula of `method` for K = `stages`, m = `microbatches`, every stage costing `cost` (ms), v =
    `chunks` per device (interleaved 1F1B); None where there is none (DualPipe-V, a new method)."""
    k, m = stages, microbatches
    if method == "gpipe":
        return Textbook(formula="(K − 1) / (m + K − 1)", value=textbook_bubble("gpipe", k, m),
                        source="Huang et al. 2019 (GPipe)")
    if method == "1f1b":
        of_compute = textbook_bubble("1f1b", k, m)
        return Textbook(formula=f"(K − 1) / (m + K − 1), i.e. (K − 1) / m = {100 * of_compute:.0f}% of the compute",
                        value=_of_step(of_compute, 1.0), source="Narayanan et al. 2021 (PipeDream-Flush / 1F1B)")
    if method == INTERLEAVED_1F1B:
        of_compute = (k - 1) / (chunks * m)
        return Textbook(formula=f"(K − 1) / (v·m + K − 1), i.e. (K − 1) / (v·m) = {100 * of_compute:.0f}% of the compute (v = {chunks})",
                        value=_of_step(of_compute, 1.0), source="Narayanan et al. 2021 (interleaved 1F1B)")
    if method == "zb-h1":
        b_in = cost.B - cost.W
        return Textbook(formula="I / (I + m(F + B)), I = (K − 1)(F + B_in − W) idle, B_in = B − W",
                        value=_of_step((k - 1) * (cost.F + b_in - cost.W), m * (cost.F + cost.B)),
                        source="Qi et al. 2023 (zero bubble, ZB-H1)")
    if method == "zerolock":
        return Textbook(formula="(K − 1)F / ((K − 1)F + m(F + L))", value=_of_step((k - 1) * cost.F,
                                                                                    m * (cost.F + cost.L)),
                        source="this project's count: the fill, stage s waits s·F for its first hidden state")
    return None


def why_they_differ(method: str, *, simulated: float, book: Textbook | None, stage_costs: Sequence[StageCost],
                    link: LinkCost, stages: int, microbatches: int) -> str:
    """One sentence: they agree, or what of this setting the formula leaves out."""
    if book is None:
        what = "DualPipe-V overlaps two chunks per device" if method == DUALPIPE_V else "this schedule"
        return f"No textbook formula is given here for {what}: read the simulated figure."
    gap = 100 * (simulated - book.value)
    if abs(gap) < AGREE_PP:
        return "They agree: equal stages and an ideal link are exactly the formula's assumptions."
    reasons = []
    if not uniform(stage_costs):
        slow = max(range(len(stage_costs)), key=lambda s: sum(stage_costs[s].row()))
        reasons.append(f"the stages are unequal: the slowest (stage {slow}) paces the pipeline and the others "
                       "wait for it, where the formula assumes K equal stages")
    if not link.ideal:
        reasons.append(f"every hand-off crosses a link ({link.latency_ms:g} ms latency, {link.send_ms:g} ms per "
                       "message) that the formula takes as free: the K − 1 hops lengthen the fill and the drain")
    if method == INTERLEAVED_1F1B and microbatches % stages:
        reasons.append("m is not a multiple of K: the rounds leave gaps the formula does not count")
    if not reasons:
        reasons.append("the formula counts the fill and the drain only; this order leaves other gaps")
    more = "more" if gap > 0 else "less"
    return f"The simulation idles {abs(gap):.0f} points {more} than the formula: " + "; ".join(reasons) + "."
