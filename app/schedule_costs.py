"""Explain's editable costs: per stage (device) F, B, W and L in milliseconds, and the link, as a student
types them, checked and turned into the simulator's `Costs` and `LinkProfile`.

A row is the cost of one stage's worth of layers (1/K of the model) on that device. A schedule that cuts
the model into v chunks per device (interleaved 1F1B, DualPipe-V) costs each chunk 1/v of its device's
row: the same model, the same hardware, cut finer.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from zerolock_core.schedule import Costs, LinkProfile, Schedule

MS = 1e-3
COST_MIN_MS, COST_MAX_MS = 0.1, 1000.0  # a compute action: > 0 (a zero-cost stage divides by zero), < 1 s
LINK_MAX_MS = 1000.0
MESSAGE_BYTES = 2**20  # a nominal hidden state (and gradient): the link's send time is per message
COLUMNS = ("F", "B", "W", "L")
COLUMN_WORDS = {"F": "forward", "B": "whole backward", "W": "the weights' part of B (ZB-H1, DualPipe-V)",
                "L": "ZeroLock's local step"}
HEADERS = ["stage", *(f"{c} (ms)" for c in COLUMNS)]


@dataclass(kw_only=True, frozen=True)
class StageCost:
    """One stage's milliseconds: forward, whole backward, the weight-gradient part of it, ZeroLock's L."""
    F: float = 10.0
    B: float = 20.0
    W: float = 10.0
    L: float = 20.0

    def __post_init__(self) -> None:
        for name in COLUMNS:
            value = getattr(self, name)
            low = 0.0 if name == "W" else COST_MIN_MS
            if not low <= value <= COST_MAX_MS:
                raise ValueError(f"{name} = {value:g} ms is out of bounds: choose {low:g} … {COST_MAX_MS:g} ms")
        if self.W > self.B:
            raise ValueError(f"W = {self.W:g} ms exceeds B = {self.B:g} ms: W is the weights' part of the backward")

    def row(self) -> list[float]:
        return [getattr(self, c) for c in COLUMNS]


DEFAULT_COST = StageCost()  # a backward about two forwards, L about a backward, W half a backward


@dataclass(kw_only=True, frozen=True)
class LinkCost:
    """Each message waits `latency_ms` and holds its hop `send_ms` (hops carry one message at a time)."""
    latency_ms: float = 0.0
    send_ms: float = 0.0

    def __post_init__(self) -> None:
        for name in ("latency_ms", "send_ms"):
            value = getattr(self, name)
            if not 0 <= value <= LINK_MAX_MS:
                raise ValueError(f"the link's {name.removesuffix('_ms')} = {value:g} ms is out of bounds: "
                                 f"choose 0 … {LINK_MAX_MS:g} ms")

    @property
    def ideal(self) -> bool:
        return self.latency_ms == 0 and self.send_ms == 0

    def profile(self) -> LinkProfile:
        bandwidth = math.inf if self.send_ms == 0 else MESSAGE_BYTES / (self.send_ms * MS)
        return LinkProfile(bandwidth_bytes_per_s=bandwidth, latency_s=self.latency_ms * MS)


def _number(value: object, what: str) -> float:
    """A cell as a float; ValueError naming the cell when it is empty or not a finite number."""
    if isinstance(value, str):
        value = value.strip()
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise ValueError(f"{what} = {value!r} is not a number of milliseconds")
    return number


def parse_link(latency_ms: object, send_ms: object) -> LinkCost:
    return LinkCost(latency_ms=_number(latency_ms, "the link's latency"), send_ms=_number(send_ms, "the link's send time"))


def cost_rows(rows: Sequence[Sequence[object]] | None, stages: int) -> list[list[object]]:
    """The table for K stages: the rows kept as typed, the missing ones copied from the last (or the
    default), the extra ones dropped; the first column renumbered."""
    body = [list(r)[1:1 + len(COLUMNS)] for r in (rows or []) if len(r) > len(COLUMNS)]
    body = body[:stages] + [body[-1] if body else DEFAULT_COST.row()] * max(0, stages - len(body))
    return [[s, *row] for s, row in enumerate(body)]


def parse_cost_table(rows: Sequence[Sequence[object]] | None, stages: int) -> tuple[StageCost, ...]:
    """One StageCost per stage from the table's rows (`cost_rows` fills what is missing); ValueError
    naming the stage and the cell of the first bad one."""
    out = []
    for s, *cells in cost_rows(rows, stages):
        values = {c: _number(v, f"stage {s}'s {c}") for c, v in zip(COLUMNS, cells)}
        try:
            out.append(StageCost(**values))
        except ValueError as err:
            raise ValueError(f"stage {s}: {err}") from None
    return tuple(out)


def uniform(stage_costs: Sequence[StageCost]) -> bool:
    return len(set(stage_costs)) <= 1


def schedule_costs(stage_costs: Sequence[StageCost], schedule: Schedule, link: LinkCost) -> Costs:
    """The simulator's costs for `schedule`: each of its stages (chunks) costs its device's row divided by
    the chunks each device holds; sends carry one nominal message over the link."""
    share = schedule.devices / schedule.stages
    per_stage = {s: {c: getattr(stage_costs[schedule.device_of(s)], c) * MS * share for c in COLUMNS}
                 for s in range(schedule.stages)}
    nbytes = 0 if link.ideal else MESSAGE_BYTES
    return Costs(forward=DEFAULT_COST.F * MS, backward=DEFAULT_COST.B * MS, weight_grad=DEFAULT_COST.W * MS,
                 local=DEFAULT_COST.L * MS, per_stage=per_stage, hidden_bytes=nbytes, grad_bytes=nbytes)
