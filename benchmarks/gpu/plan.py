"""What `zerolock bench gpu` runs, section by section: the full plan for one H200 (the paper's shapes) and the
tiny plan of the CPU dry run (every section's code path in seconds). Each section's timeout bounds it; the
full plan's add up to 8 minutes, so the whole command fits one 10-minute device call."""
from __future__ import annotations

from dataclasses import dataclass

from ..common import paper
from ..recovery import VARIANTS
from ..common.settings import METHODS

SECTIONS = ("tests", "e1", "envelope", "e2")

@dataclass(kw_only=True, frozen=True)
class GpuPlan:
    model: str
    seq_len: int
    stages: int  # E1, the envelope and E2
    # E1: throughput, per-stage peaks, activations, bubble at one (b, m)
    e1_batch: int
    e1_microbatches: int
    e1_steps: int
    e1_methods: tuple[str, ...]
    # the envelope: the largest b under an activation budget, m fixed
    envelope_methods: tuple[str, ...]
    envelope_microbatches: int
    envelope_max_batch: int
    envelope_steps: int
    envelope_fallback_budget: int  # bytes, when E1 measured nothing to calibrate from
    # E2: one failure at stage 1, ZeroLock (local replay) vs 1F1B (global rollback)
    e2_batch: int
    e2_microbatches: int
    e2_steps: int
    e2_fail_step: int
    e2_ckpt_every: int
    e2_variants: tuple[tuple[str, bool], ...]
    timeouts_s: dict[str, float]

    def __post_init__(self) -> None:
        assert set(self.timeouts_s) == set(SECTIONS), self.timeouts_s


def full_plan() -> GpuPlan:
    """The paper's E1 / envelope / E2 at TinyLlama shape, K=3 stage processes on one GPU."""
    return GpuPlan(
        model="tinyllama-shape", seq_len=128, stages=3,
        e1_batch=8, e1_microbatches=4, e1_steps=20, e1_methods=METHODS,
        # b up to 32: past the paper's largest (ZeroLock, 28)
        envelope_methods=METHODS, envelope_microbatches=4, envelope_max_batch=32, envelope_steps=1,
        envelope_fallback_budget=2 * 2**30,
        # b=8, m=8: b=1 per micro-batch, as the paper; 12 steps leave the warm standby time to be ready at step 5
        e2_batch=8, e2_microbatches=8, e2_steps=12, e2_fail_step=5, e2_ckpt_every=2, e2_variants=VARIANTS,
        timeouts_s={"tests": 120.0, "e1": 150.0, "envelope": 120.0, "e2": 90.0})


def tiny_plan() -> GpuPlan:
    """The dry run: the tiny model, one or two methods where a section compares four (E1 keeps GPipe: the
    envelope calibrates from it), one probe in the envelope, one failure in E2."""
    return GpuPlan(
        model="tiny", seq_len=16, stages=2,
        e1_batch=2, e1_microbatches=2, e1_steps=2, e1_methods=("zerolock", "gpipe"),
        envelope_methods=("gpipe",), envelope_microbatches=2, envelope_max_batch=2, envelope_steps=1,
        envelope_fallback_budget=2**30,
        e2_batch=2, e2_microbatches=2, e2_steps=4, e2_fail_step=2, e2_ckpt_every=1,
        e2_variants=(("zerolock", False),),
        timeouts_s={"tests": 120.0, "e1": 180.0, "envelope": 180.0, "e2": 240.0})


def calibrated_budget(e1: dict | None, plan: GpuPlan) -> tuple[int, str]:
    """The envelope's activation budget per stage, and how it was chosen: GPipe's largest per-stage activation
    peak in E1, scaled linearly (all m micro-batches are alive under GPipe) to b just under the paper's first
    GPipe OOM — so GPipe's envelope matches the paper's and the question is where the others land."""
    gpipe = ((e1 or {}).get("result") or {}).get("results", {}).get("gpipe")
    if not gpipe:
        return plan.envelope_fallback_budget, "fallback: E1 has no GPipe run to calibrate from"
    peak = gpipe["summary"]["max_activation_bytes"]
    target = paper.OOM_AT_BATCH["gpipe"] - 1
    return int(peak * target / plan.e1_batch), (f"GPipe's max activation peak at b={plan.e1_batch} in E1 "
                                                f"({peak} B) scaled to b={target}")
