"""One method at one (K, b, m, link): measured by a real run, predicted by the simulator.

Throughput on both sides is the same quantity from the same function (`timeline.throughput`):
samples per second after the first window (start-up and first-call costs excluded), so a
prediction and a measurement are comparable. Predictions cost each action with `probe_costs`
(this process, one stage at a time, the stages' thread count): valid where the real stages
would each have their own cores, which is exactly what an oversubscribed run lacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zerolock_core.config.run_config import LinkConfig
from zerolock_core.runtime.link_emulation import link_for
from zerolock_core.schedule import schedulable
from zerolock_core.schedule.spans import spans_from_events, throughput
from .machine import oversubscribed
from .prediction import predict
from .pipeline_runs import PipelineRuns, RunOutcome
from .settings import BenchSettings

if TYPE_CHECKING:
    from .probe import ProbedCosts


def skip_windows(steps: int) -> int:
    return 1 if steps >= 2 else 0


@dataclass(kw_only=True)
class Probes:
    """Probed costs, cached per (K, micro-batch size)."""

    settings: BenchSettings
    cache: dict[tuple[int, int, int], ProbedCosts] = field(default_factory=dict)

    def get(self, *, stages: int, batch: int, microbatches: int) -> ProbedCosts:
        key = (stages, batch, microbatches)
        if key not in self.cache:
            from .probe import probe_costs  # torch: only when a probe runs

            self.cache[key] = probe_costs(self.settings, stages=stages, batch=batch, microbatches=microbatches)
        return self.cache[key]


def measured(o: RunOutcome, *, batch: int, microbatches: int, steps: int) -> dict[str, Any]:
    spans = spans_from_events(o.events)
    return {
        "samples_per_s": throughput(
            spans, batch=batch, microbatches=microbatches, windows=steps, skip_windows=skip_windows(steps)
        ),
        "samples_per_s_whole_run": o.metrics.throughput_samples_per_s,
        "active_fraction": [s["active_fraction"] for s in o.per_stage],
        "bubble_fraction": o.metrics.bubble_fraction,
        "peak_inflight": [s["peak_inflight_microbatches"] for s in o.per_stage],
        "peak_activation_bytes": [s["peak_activation_bytes"] for s in o.per_stage],
        "bytes_sent": [s["bytes_sent"] for s in o.per_stage],
        "run": str(o.dir),
    }


def measure_and_predict(
    settings: BenchSettings,
    *,
    runs: PipelineRuns,
    probes: Probes | None,
    method: str,
    stages: int,
    batch: int,
    microbatches: int,
    link: LinkConfig | None = None,
    predict_only: bool = False,
) -> dict[str, Any]:
    link = link or LinkConfig()
    row: dict[str, Any] = {
        "method": method,
        "stages": stages,
        "batch": batch,
        "microbatches": microbatches,
        "link": link.profile,
        "oversubscribed": oversubscribed(stages=stages, threads=settings.threads, device=settings.device),
    }
    if not predict_only:
        cfg = settings.pipeline(
            method=method, stages=stages, batch=batch, microbatches=microbatches, link=link, out=runs.root
        )
        row["measured"] = measured(runs.run(cfg), batch=batch, microbatches=microbatches, steps=settings.steps)
        row["measured"]["samples_per_s_every_repeat"] = [
            measured(o, batch=batch, microbatches=microbatches, steps=settings.steps)["samples_per_s"]
            for o in runs.all(cfg)
        ]
    if probes is not None:
        p = probes.get(stages=stages, batch=batch, microbatches=microbatches)
        pred = predict(
            method=method,
            stages=stages,
            batch=batch,
            microbatches=microbatches,
            windows=settings.steps,
            costs=p.costs(method),
            link=link_for(link),
            inflight_limit=settings.inflight_depth,
            skip_windows=skip_windows(settings.steps),
        )
        row["predicted"] = {
            "samples_per_s": pred.samples_per_s,
            "active_fraction": list(pred.active_fraction),
            "bubble_fraction": pred.bubble_fraction,
            "peak_inflight": list(pred.inflight_peak),
            "costs_from": "probe (this process, one stage at a time)",
        }
    return row


def measure_all(settings: BenchSettings, *, runs: PipelineRuns, probes: Probes | None,
                cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`measure_and_predict` of every case (method, stages, batch, microbatches and maybe link), after
    running all of their configs round-robin: a burst of other work hits every case alike."""
    runs.prefetch([settings.pipeline(**case, out=runs.root) for case in cases])
    return [measure_and_predict(settings, runs=runs, probes=probes, **case) for case in cases]


def depth_cases(stages: tuple[int, ...], methods: tuple[str, ...], **geometry: Any) -> list[dict[str, Any]]:
    """(method, K) for every K, then every method that has a schedule there (1F1B needs m >= K)."""
    return [dict(method=m, stages=k, **geometry) for k in dict.fromkeys(stages) for m in methods
            if schedulable(m, stages=k, microbatches=geometry["microbatches"])]


def measured_blocks(settings: BenchSettings, *, runs: PipelineRuns, simulate: bool, cases: list[dict[str, Any]],
                    key: str, names: tuple[Any, ...]) -> dict[Any, list[dict[str, Any]]]:
    """The `measure_all` rows of `cases`, grouped by their `key` (stages, link), one group per name."""
    rows = measure_all(settings, runs=runs, probes=Probes(settings=settings) if simulate else None, cases=cases)
    return {name: [r for r in rows if r[key] == name] for name in names}


def best_estimate(row: dict[str, Any]) -> tuple[float, str]:
    """The throughput to quote: measured unless the run was oversubscribed (then the simulator's)."""
    if "measured" in row and not row["oversubscribed"]:
        return row["measured"]["samples_per_s"], "measured"
    if "predicted" in row:
        return row["predicted"]["samples_per_s"], "simulated"
    return row["measured"]["samples_per_s"], "measured (oversubscribed)"
