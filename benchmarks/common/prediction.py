"""Simulator predictions: a schedule costed with measured per-action seconds and a link model."""

from __future__ import annotations

from dataclasses import dataclass

from zerolock_core.schedule import Costs, LinkProfile, build_schedule, simulate
from zerolock_core.schedule.spans import spans_from_sim, throughput


@dataclass(kw_only=True, frozen=True)
class Prediction:
    samples_per_s: float
    inflight_peak: tuple[int, ...]
    active_fraction: tuple[float, ...]
    bubble_fraction: float


def predict(
    *,
    method: str,
    stages: int,
    batch: int,
    microbatches: int,
    windows: int,
    costs: Costs,
    link: LinkProfile,
    inflight_limit: int | None,
    skip_windows: int = 0,
) -> Prediction:
    """Simulate `windows` windows; throughput over windows [skip_windows, windows), as measured."""
    sched = build_schedule(method, stages=stages, microbatches=microbatches, windows=windows)
    result = simulate(sched, costs=costs, link=link, inflight_limit=inflight_limit)
    tput = throughput(
        spans_from_sim(result), batch=batch, microbatches=microbatches, windows=windows, skip_windows=skip_windows
    )
    return Prediction(
        samples_per_s=tput,
        inflight_peak=result.inflight_peak,
        active_fraction=result.active_fraction,
        bubble_fraction=result.bubble_fraction,
    )
