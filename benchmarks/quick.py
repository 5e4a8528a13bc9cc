"""`zerolock bench quick`: the four pipeline methods back to back on one config, one table.

Measured side by side in one invocation on the same machine; ratios are relative to GPipe.
"""

from __future__ import annotations

import argparse
from typing import Any

from .machine import oversubscribed
from .runner import Experiment, add_shape_flags, pipeline_runs, register_experiment, shape
from .runs import PipelineRuns
from .settings import METHODS, BenchSettings, add_common_flags, report_header


def run_quick(settings: BenchSettings, *, runs: PipelineRuns, stages: int, batch: int, microbatches: int,
              methods: tuple[str, ...] = METHODS) -> dict[str, Any]:
    cfgs = {m: settings.pipeline(method=m, stages=stages, batch=batch, microbatches=microbatches, out=runs.root)
            for m in methods}
    runs.prefetch(list(cfgs.values()))  # round-robin over the methods when --repeats > 1
    results = {}
    for method, cfg in cfgs.items():
        m = runs.run(cfg).metrics
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
    lines = [
        f"machine: {report['machine']}",
        "config: "
        + ", ".join(f"{k}={v}" for k, v in report["config"].items())
        + ("  (more stage threads than cores: oversubscribed)" if report["oversubscribed"] else ""),
        f"{'method':<10} {'samples/s':>10} {'vs gpipe':>9} {'mean act MiB':>13} {'vs gpipe':>9} "
        f"{'max act MiB':>12} {'in-flight':>10} {'active fraction':>18}",
    ]
    for method, x in r.items():
        rel_t = f"{x['throughput_samples_per_s'] / base['throughput_samples_per_s'] - 1:+.1%}" if base else ""
        rel_m = f"{x['mean_peak_activation_bytes'] / base['mean_peak_activation_bytes'] - 1:+.1%}" if base else ""
        lines.append(
            f"{method:<10} {x['throughput_samples_per_s']:>10.1f} {rel_t:>9} "
            f"{x['mean_peak_activation_bytes'] / 2**20:>13.2f} {rel_m:>9} "
            f"{x['max_peak_activation_bytes'] / 2**20:>12.2f} {str(x['peak_inflight']):>10} "
            f"{' '.join(f'{a:.2f}' for a in x['active_fraction']):>18}"
        )
    return "\n".join(lines)


def register(p: argparse.ArgumentParser) -> None:
    add_common_flags(p, steps=20)
    add_shape_flags(p, stages=3)
    register_experiment(p, Experiment(name="quick", run=run_quick, figures=lambda report: {},
                                      format_report=format_table,
                                      arguments=lambda a, out: dict(shape(a), runs=pipeline_runs(a, out))))
