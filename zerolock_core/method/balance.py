"""Chunk boundaries for uneven stages (`--boundaries auto`): contiguous chunks of layers whose times
on their stages' devices (`--stage-speed`) come out as even as they can.

`balanced_boundaries` is exact: a small dynamic programme first finds the least possible time of the
slowest stage (a pipeline's step is bounded by it), then, among the splits that reach it, the one
with the least sum of squared stage times; a tie puts the larger chunks first, as the even split does
(chunks.chunk_bounds), so equal costs and speeds give the even split.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

AUTO: tuple[int, ...] = ()  # ModelConfig.boundaries of `--boundaries auto` (no K needs () otherwise)


def is_auto(boundaries: tuple[int, ...] | list[int] | None) -> bool:
    """Whether `ModelConfig.boundaries` is `--boundaries auto` (not yet resolved by auto_boundaries.py)."""
    return boundaries is not None and tuple(boundaries) == AUTO
_EPS = 1e-9  # relative: float sums of the same costs in another order still tie


@dataclass(frozen=True, kw_only=True)
class ChunkCosts:
    """What a chunk's time is made of, in one unit (seconds when measured, layer_costs.py): each decoder
    layer's forward and backward, chunk 0's embedding, the readout head (norm + LM head at the answer
    positions + the loss, forward and backward) of every chunk that reads out, and the forward of the
    upstream chunk's head that a local objective's consistency term recomputes on every chunk after the
    first."""
    layers: tuple[float, ...]
    embedding: float = 0.0
    head: float = 0.0
    upstream_head: float = 0.0

    @classmethod
    def uniform(cls, num_layers: int) -> "ChunkCosts":
        """The estimate where nothing was measured (a preview, `chunk_bounds`): every decoder layer costs the
        same (1); the embedding (a lookup) and the heads, at a few answer rows, are left out."""
        return cls(layers=(1.0,) * num_layers)

    def extras(self, stages: int, *, every_chunk_reads_out: bool, readout_layers: int) -> list[float]:
        """What each of `stages` chunks adds to its layers' cost: the embedding on the first, the head on every
        chunk that reads out (every one under a local objective, else the last), the upstream head's forward
        on every chunk after the first under a local objective, and a `top:N` (or `sample:N`) readout's N layers
        on every chunk before the last (the last runs them as its own layers)."""
        top = sum(self.layers[len(self.layers) - readout_layers:]) if readout_layers else 0.0
        return [(self.embedding if s == 0 else 0.0)
                + (self.head if every_chunk_reads_out or s == stages - 1 else 0.0)
                + (self.upstream_head if every_chunk_reads_out and s > 0 else 0.0)
                + (top if s < stages - 1 else 0.0) for s in range(stages)]


def balanced_boundaries(costs: ChunkCosts | Sequence[float], speeds: Sequence[float], *,
                        readout_layers: int = 0, every_chunk_reads_out: bool = True) -> tuple[int, ...]:
    """The first layer of chunks 2..K (K = len(speeds)) for `costs` (a `ChunkCosts`, or the layers' costs
    alone) on stages of `speeds` (a chunk's time: its layers' and extras' costs / its stage's speed).

    `readout_layers` = N of a `top:N` readout (or `sample:N`, weighed alike): every chunk before the last also
    runs its copy of the model's top N layers (their cost added to its time), and the last chunk holds at least
    those N layers."""
    costs = costs if isinstance(costs, ChunkCosts) else ChunkCosts(layers=tuple(costs))
    n, k = len(costs.layers), len(speeds)
    if not 1 <= k <= n:
        raise ValueError(f"{k} stages cannot split {n} layers (each stage needs at least one)")
    if any(not c >= 0 for c in (*costs.layers, costs.embedding, costs.head, costs.upstream_head)) \
            or any(not 0 < s <= 1 for s in speeds):
        raise ValueError("layer costs must be >= 0 and speeds in (0, 1]")
    if not 0 <= readout_layers <= n - k + 1:
        raise ValueError(f"a readout through {readout_layers} top layers leaves too few of {n} layers for "
                         f"{k} stages")
    prefix = [0.0]
    for c in costs.layers:
        prefix.append(prefix[-1] + c)
    extras = costs.extras(k, every_chunk_reads_out=every_chunk_reads_out, readout_layers=readout_layers)
    return _Split(prefix, speeds, n, extras=extras, last_at_least=readout_layers).cuts()


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
