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
    if readout_layers == 0 or k == 1:
        return _Split(prefix, speeds, n, extra=0.0).cuts()
    # every start of the last chunk that leaves it the N top layers: the best split of the others with the
    # readout's cost on each (a least slowest stage, then the least sum of squares; a tie keeps the smaller
    # last chunk, as the even split)
    extra, last = prefix[n] - prefix[n - readout_layers], speeds[-1]
    options = []
    for first in range(k - 1, n - readout_layers + 1):
        head = _Split(prefix, speeds[:-1], first, extra=extra)
        options.append((first, head, (prefix[n] - prefix[first]) / last))
    bound = min(max(head.slowest, t) for _, head, t in options) * (1 + _EPS) + _EPS
    feasible = [(head.squares(bound) + t * t, first, head) for first, head, t in options if t <= bound]
    least = min(sq for sq, _, _ in feasible)
    _, first, head = max((o for o in feasible if o[0] <= least * (1 + _EPS) + _EPS), key=lambda o: o[1])
    return (*head.cuts(bound), first)


class _Split:
    """Layers [0, end) over the stages of `speeds`, every chunk adding `extra` to its layers' cost: the least
    possible time of the slowest stage (`slowest`), then the split with the least sum of squared stage times
    among those no slower than a bound, its cuts from the last chunk back, each at the latest start that
    reaches the optimum (larger chunks first, as the even split)."""

    def __init__(self, prefix: list[float], speeds: Sequence[float], end: int, *, extra: float) -> None:
        self.prefix, self.speeds, self.end, self.extra = prefix, speeds, end, extra
        k, inf = len(speeds), float("inf")
        # slowest[j][i]: the least time of the slowest of stages 0..j-1 holding layers [0, i)
        slowest = [[inf] * (end + 1) for _ in range(k + 1)]
        slowest[0][0] = 0.0
        for j in range(1, k + 1):
            for i in range(j, end - (k - j) + 1):
                slowest[j][i] = min(max(slowest[j - 1][f], self.time(j - 1, f, i)) for f in range(j - 1, i))
        self.slowest = slowest[k][end]
        self._squares: dict[float, list[list[float]]] = {}

    def time(self, stage: int, first: int, end: int) -> float:
        return (self.prefix[end] - self.prefix[first] + self.extra) / self.speeds[stage]

    def _table(self, bound: float) -> list[list[float]]:
        """squares[j][i]: the least sum of squared times of stages 0..j-1 holding [0, i), none above `bound`."""
        if bound not in self._squares:
            k, end, inf = len(self.speeds), self.end, float("inf")
            squares = [[inf] * (end + 1) for _ in range(k + 1)]
            squares[0][0] = 0.0
            for j in range(1, k + 1):
                for i in range(j, end - (k - j) + 1):
                    squares[j][i] = min((squares[j - 1][f] + self.time(j - 1, f, i) ** 2 for f in range(j - 1, i)
                                         if self.time(j - 1, f, i) <= bound), default=inf)
            self._squares[bound] = squares
        return self._squares[bound]

    def squares(self, bound: float) -> float:
        return self._table(bound)[len(self.speeds)][self.end]

    def cuts(self, bound: float | None = None) -> tuple[int, ...]:
        bound = self.slowest * (1 + _EPS) + _EPS if bound is None else bound
        squares = self._table(bound)
        cuts, end = [], self.end
        for j in range(len(self.speeds), 1, -1):  # from the last chunk back: the latest start reaching the optimum
            best = squares[j][end]
            start = max(f for f in range(j - 1, end) if self.time(j - 1, f, end) <= bound
                        and squares[j - 1][f] + self.time(j - 1, f, end) ** 2 <= best * (1 + _EPS) + _EPS)
            cuts.append(start)
            end = start
        return tuple(reversed(cuts))
