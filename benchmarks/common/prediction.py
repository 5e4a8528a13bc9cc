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
    frozen_stages: int = 0,
) -> Prediction:
    """Simulate `windows` windows; throughput over windows [skip_windows, windows), as measured."""
    sched = build_schedule(method, stages=stages, microbatches=microbatches, windows=windows,
                           frozen_stages=frozen_stages)
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


def steady_step_s(*, method: str, stages: int, microbatches: int, windows: int, costs: Costs, link: LinkProfile,
                  inflight_limit: int | None, frozen_stages: int = 0) -> float:
    """Seconds per optimizer step once the pipeline is full: what `windows` more windows add to the makespan.
    A run of hundreds of steps fills its pipeline once. `predict`'s rate, over a few windows from stage 0's
    first kept start (as a short timing run is measured), also charges each window a share of that fill —
    and of the lead a schedule that never flushes (PipeDream, ZeroLock, terminal) lets its first stage
    build; a flushing schedule's windows are all alike, so for it the two agree."""
    def makespan(w: int) -> float:
        sched = build_schedule(method, stages=stages, microbatches=microbatches, windows=w,
                               frozen_stages=frozen_stages)
        return simulate(sched, costs=costs, link=link, inflight_limit=inflight_limit).makespan_s

    return (makespan(2 * windows) - makespan(windows)) / windows
