"""`zerolock bench quick`: the four pipeline methods back to back on one config, one table.

Measured side by side in one invocation on the same machine; ratios are relative to GPipe.
"""

from __future__ import annotations

from typing import Any

from .common.machine import oversubscribed
from .common.experiment import Experiment
from .common.pipeline_runs import PipelineRuns
from .common.settings import METHODS, BenchSettings, report_header
from .common.table import joined, mib, pct, preamble


def run_quick(settings: BenchSettings, *, runs: PipelineRuns, stages: int, batch: int, microbatches: int,
              methods: tuple[str, ...] = METHODS) -> dict[str, Any]:
    # round-robin over the methods when --repeats > 1
    outcomes = runs.outcomes([settings.pipeline(method=m, stages=stages, batch=batch, microbatches=microbatches,
                                                out=runs.root) for m in methods])
    results = {}
    for method, o in zip(methods, outcomes):
        m = o.metrics
        peaks = [s["peak_activation_bytes"] for s in m["per_stage"]]
        results[method] = {
            "throughput_samples_per_s": m["throughput_samples_per_s"],
            "mean_peak_activation_bytes": sum(peaks) / len(peaks),
            "max_peak_activation_bytes": max(peaks),
            "active_fraction": [s["active_fraction"] for s in m["per_stage"]],
            "peak_inflight": [s["peak_inflight_microbatches"] for s in m["per_stage"]],
            "bubble_fraction": m["bubble_fraction"],
        }
    return report_header("quick", settings, config={
        "model": settings.model, "stages": stages, "batch": batch, "microbatches": microbatches,
        "steps": settings.steps, "seq_len": settings.seq_len, "threads_per_stage": settings.threads},
        oversubscribed=oversubscribed(stages=stages, threads=settings.threads, device=settings.device),
        results=results)


def format_table(report: dict[str, Any]) -> str:
    r = report["results"]
    base = r.get("gpipe")
    vs_gpipe = lambda x, key: pct(x[key] / base[key] - 1) if base else ""  # noqa: E731
    lines = preamble(
        report,
        "config: " + ", ".join(f"{k}={v}" for k, v in report["config"].items())
        + ("  (more stage threads than cores: oversubscribed)" if report["oversubscribed"] else ""),
        f"{'method':<10} {'samples/s':>10} {'vs gpipe':>9} {'mean act MiB':>13} {'vs gpipe':>9} "
        f"{'max act MiB':>12} {'in-flight':>10} {'active fraction':>18}")
    for method, x in r.items():
        lines.append(f"{method:<10} {x['throughput_samples_per_s']:>10.1f} "
                     f"{vs_gpipe(x, 'throughput_samples_per_s'):>9} {mib(x['mean_peak_activation_bytes']):>13} "
                     f"{vs_gpipe(x, 'mean_peak_activation_bytes'):>9} {mib(x['max_peak_activation_bytes']):>12} "
                     f"{str(x['peak_inflight']):>10} {joined(x['active_fraction']):>18}")
    return "\n".join(lines)


EXPERIMENT = Experiment(name="quick", run=run_quick, format_report=format_table, steps=20, shape={"stages": 3})
register = EXPERIMENT.register
