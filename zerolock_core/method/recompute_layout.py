"""Which layers of a 1F1B / PipeDream stage to recompute (--recompute) so that every stage holds under half
of an even 1F1B's peak activation memory: what the frontier study's recompute arms run and what the Run
form's "halve" choice asks for."""
from __future__ import annotations

MEMORY_HALVING = "halve"  # the Run form's name for this layout (the other choice recomputes nothing)


def memory_halving_recompute(layout: tuple[int, ...]) -> tuple[int, ...]:
    """Recomputed layers per stage of a K-stage 1F1B / PipeDream pipeline with `layout` layers per stage
    (the even split: extra layers first).

    Stage s holds K − s micro-batches at its peak (both schedules); a recomputed layer keeps only its input
    (about a thirteenth of its activations on SmolLM2), and the backward holds one layer's activations again
    while it recomputes it. In layer-micro-batches, a stage with r of its n layers recomputed holds
    (K − s)(n − r) + 1; it recomputes the fewest layers that keep this under half of 1F1B's stage 0 (K
    micro-batches of its layers) by at least one layer's micro-batch — which also covers the kept inputs.
    Each recomputed layer costs one more forward of it in the backward: on a stage with slack (the last
    stage, which also runs the head and the loss, is the slowest on SmolLM2) that time is free."""
    stages = len(layout)
    if stages < 1 or min(layout) < 1:
        raise ValueError(f"a layout needs at least one layer per stage, got {list(layout)}")
    budget = stages * layout[0] / 2 - 1

    def fewest(s: int, n: int) -> int:
        held = stages - s
        return next((r for r in range(n + 1) if held * (n - r) + (1 if r else 0) <= budget), n)

    return tuple(fewest(s, n) for s, n in enumerate(layout))

