"""The layout of a frozen-prefix pipeline (--frozen-stages N) that the frontier study runs: how many layers
each stage gets, and the largest LoRA rank that trains no more parameters than BP on every layer."""
from __future__ import annotations

import math


def memory_halving_layout(layers: int, *, stages: int, frozen: int) -> tuple[int, ...]:
    """Layers per stage of a K-stage 1F1B / PipeDream pipeline whose first `frozen` stages only forward.

    A trained stage s holds K − s micro-batches at its peak; it gets as many layers as keep that below
    half of an even 1F1B's stage 0 (K micro-batches of ⌈L/K⌉ layers) by at least one layer's micro-batch —
    a layer's activations differ a little from stage to stage, and a layout exactly at half measured 0.504
    on SmolLM2 — and no more than an even stage's share, so that it is no slower: ⌈L/K⌉ for an inner
    stage, ⌊L/K⌋ for the last, which also runs the head and the loss. The frozen stages share the rest
    (extra layers first): they hold no graph and only forward, so more layers cost them about a third of
    what they would cost a trained stage."""
    if not 0 < frozen < stages <= layers:
        raise ValueError(f"a frozen-prefix layout needs 0 < frozen ({frozen}) < stages ({stages}) <= layers "
                         f"({layers})")
    even = math.ceil(layers / stages)
    budget = stages * even / 2 - 1  # layer-micro-batches a stage may hold: under half of 1F1B's stage 0
    trained = [min(math.floor(budget / (stages - s)), even if s < stages - 1 else layers // stages)
               for s in range(frozen, stages)]
    rest = layers - sum(trained)
    if rest < frozen:
        raise ValueError(f"{layers} layers leave {rest} for {frozen} frozen stages")
    share, extra = divmod(rest, frozen)
    return tuple(share + (i < extra) for i in range(frozen)) + tuple(trained)


def boundaries_of(layout: tuple[int, ...]) -> tuple[int, ...]:
    """--boundaries for a layout: the first layer of chunks 2..K."""
    return tuple(sum(layout[:i]) for i in range(1, len(layout)))


def matched_rank(rank: int, *, layers: int, trained_layers: int) -> int:
    """The largest LoRA rank with which `trained_layers` layers train no more than `rank` on all `layers`
    (LoRA's parameters grow with the rank, layer by layer alike): the arm stays within BP's budget, so BP
    itself is its parameter control."""
    return max(1, rank * layers // trained_layers)
