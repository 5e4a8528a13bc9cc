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


def balanced_boundaries(layer_costs: Sequence[float], speeds: Sequence[float], *,
                        readout_layers: int = 0) -> tuple[int, ...]:
    """The first layer of chunks 2..K (K = len(speeds)) for layers of `layer_costs` on stages of `speeds`
    (a chunk's time: its layers' costs / its stage's speed).

    `readout_layers` = N of a `top:N` readout: every chunk before the last also runs its copy of the model's
    top N layers (their cost added to its time), and the last chunk holds at least those N layers."""
    n, k = len(layer_costs), len(speeds)
    if not 1 <= k <= n:
        raise ValueError(f"{k} stages cannot split {n} layers (each stage needs at least one)")
    if any(not c >= 0 for c in layer_costs) or any(not 0 < s <= 1 for s in speeds):
        raise ValueError("layer costs must be >= 0 and speeds in (0, 1]")
    prefix = [0.0]
    for c in layer_costs:
        prefix.append(prefix[-1] + c)
    if not 0 <= readout_layers <= n - k + 1:
        raise ValueError(f"a readout through {readout_layers} top layers leaves too few of {n} layers for "
                         f"{k} stages")
    extra = prefix[n] - prefix[n - readout_layers]  # the top N layers' cost, on each chunk before the last
    return _Split(prefix, speeds, n, extras=[extra] * (k - 1) + [0.0], last_at_least=readout_layers).cuts()


class _Split:
    """Layers [0, end) over the stages of `speeds`, stage s adding `extras[s]` to its layers' cost and the last
    holding at least `last_at_least` layers: the least possible time of the slowest stage (`slowest`), then the
    split with the least sum of squared stage times among those no slower than it, its cuts from the last chunk
    back, each at the latest start that reaches the optimum (larger chunks first, as the even split)."""

    def __init__(self, prefix: list[float], speeds: Sequence[float], end: int, *, extras: Sequence[float],
                 last_at_least: int) -> None:
        self.prefix, self.speeds, self.end = prefix, speeds, end
        self.extras, self.last_at_least = extras, last_at_least
        k, inf = len(speeds), float("inf")
        # slowest[j][i]: the least time of the slowest of stages 0..j-1 holding layers [0, i)
        slowest = [[inf] * (end + 1) for _ in range(k + 1)]
        slowest[0][0] = 0.0
        for j in range(1, k + 1):
            for i in range(j, end - (k - j) + 1):
                slowest[j][i] = min((max(slowest[j - 1][f], self.time(j - 1, f, i)) for f in self.starts(j, i)),
                                    default=inf)
        self.bound = slowest[k][end] * (1 + _EPS) + _EPS
        # squares[j][i]: the least sum of squared times of those stages, none slower than `bound`
        squares = [[inf] * (end + 1) for _ in range(k + 1)]
        squares[0][0] = 0.0
        for j in range(1, k + 1):
            for i in range(j, end - (k - j) + 1):
                squares[j][i] = min((squares[j - 1][f] + self.time(j - 1, f, i) ** 2 for f in self.starts(j, i)
                                     if self.time(j - 1, f, i) <= self.bound), default=inf)
        self.squares = squares

    def starts(self, j: int, end: int) -> range:
        """Where chunk j - 1 may start when it ends at `end`: a layer at least, the last chunk its N top ones."""
        keep = max(1, self.last_at_least) if j == len(self.speeds) else 1
        return range(j - 1, end - keep + 1)

    def time(self, stage: int, first: int, end: int) -> float:
        return (self.prefix[end] - self.prefix[first] + self.extras[stage]) / self.speeds[stage]

    def cuts(self) -> tuple[int, ...]:
        squares, cuts, end = self.squares, [], self.end
        for j in range(len(self.speeds), 1, -1):  # from the last chunk back: the latest start reaching the optimum
            best = squares[j][end]
            start = max(f for f in self.starts(j, end) if self.time(j - 1, f, end) <= self.bound
                        and squares[j - 1][f] + self.time(j - 1, f, end) ** 2 <= best * (1 + _EPS) + _EPS)
            cuts.append(start)
            end = start
        return tuple(reversed(cuts))
