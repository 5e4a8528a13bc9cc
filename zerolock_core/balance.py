"""Chunk boundaries for uneven stages (`--boundaries auto`): contiguous chunks of layers whose times
on their stages' devices (`--stage-speed`) come out as even as they can.

`balanced_boundaries` is exact: a small dynamic programme first finds the least possible time of the
slowest stage (a pipeline's step is bounded by it), then, among the splits that reach it, the one
with the least sum of squared stage times; a tie puts the larger chunks first, as the even split does
(chunks.chunk_bounds), so equal costs and speeds give the even split.
"""
from __future__ import annotations

from typing import Sequence

AUTO: tuple[int, ...] = ()  # ModelConfig.boundaries of `--boundaries auto` (no K needs () otherwise)
_EPS = 1e-9  # relative: float sums of the same costs in another order still tie


def llama_layer_costs(num_layers: int) -> list[float]:
    """What `--boundaries auto` assumes a layer costs: every decoder layer of a Llama model the same (1).
    The embedding is a lookup (no matmul: 0); the readout head is left out — under ZeroLock every chunk
    computes one for its own loss, the same cost on each, and under BP the last chunk's is a part of one
    layer's cost or so that this model does not weigh."""
    return [1.0] * num_layers


def balanced_boundaries(layer_costs: Sequence[float], speeds: Sequence[float]) -> tuple[int, ...]:
    """The first layer of chunks 2..K (K = len(speeds)) for layers of `layer_costs` on stages of `speeds`
    (a chunk's time: its layers' costs / its stage's speed)."""
    n, k = len(layer_costs), len(speeds)
    if not 1 <= k <= n:
        raise ValueError(f"{k} stages cannot split {n} layers (each stage needs at least one)")
    if any(not c >= 0 for c in layer_costs) or any(not 0 < s <= 1 for s in speeds):
        raise ValueError("layer costs must be >= 0 and speeds in (0, 1]")
    prefix = [0.0]
    for c in layer_costs:
        prefix.append(prefix[-1] + c)

    def time(stage: int, first: int, end: int) -> float:
        return (prefix[end] - prefix[first]) / speeds[stage]

    inf = float("inf")
    # slowest[j][i]: the least time of the slowest of stages 0..j-1 holding layers [0, i)
    slowest = [[inf] * (n + 1) for _ in range(k + 1)]
    slowest[0][0] = 0.0
    for j in range(1, k + 1):
        for i in range(j, n - (k - j) + 1):
            slowest[j][i] = min(max(slowest[j - 1][f], time(j - 1, f, i)) for f in range(j - 1, i))
    bound = slowest[k][n] * (1 + _EPS) + _EPS
    # squares[j][i]: the least sum of squared times of those stages, none slower than `bound`
    squares = [[inf] * (n + 1) for _ in range(k + 1)]
    squares[0][0] = 0.0
    for j in range(1, k + 1):
        for i in range(j, n - (k - j) + 1):
            squares[j][i] = min((squares[j - 1][f] + time(j - 1, f, i) ** 2 for f in range(j - 1, i)
                                 if time(j - 1, f, i) <= bound), default=inf)
    cuts, end = [], n
    for j in range(k, 1, -1):  # from the last chunk back: the latest start that reaches the optimum
        best = squares[j][end]
        start = max(f for f in range(j - 1, end) if time(j - 1, f, end) <= bound
                    and squares[j - 1][f] + time(j - 1, f, end) ** 2 <= best * (1 + _EPS) + _EPS)
        cuts.append(start)
        end = start
    return tuple(reversed(cuts))
