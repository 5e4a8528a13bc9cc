"""`zerolock bench memory` (paper Fig. 4): per-stage peak memory of the four methods at b=8, m=4, K=3,
broken down into model + optimizer state, stashed weight versions, and activations.

Bytes are counted, not estimated: parameters and optimizer state from the stage's tensors,
PipeDream's weight cache as (peak stashed versions × trainable bytes), activations by the
engine's saved-tensor meter (its peak, transients inside an action included). The per-stage peak
is their sum. The process RSS high-water mark is shown too; it includes the interpreter and the
torch runtime (hundreds of MiB), which dwarf a tiny model.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import paper
from .runner import Experiment, add_shape_flags, pipeline_runs, shape, register_experiment
from .machine import oversubscribed
from .runs import PipelineRuns
from .settings import (
    METHODS,
    BenchSettings,
    add_common_flags,
    report_header,
)
from .table import markdown_table, mib, pct


def stage_breakdown(stage: dict[str, Any]) -> dict[str, int]:
    """Model + state (all parameters, their gradients' worth for the trainable ones, optimizer
    state), the weight cache, and the activation peak of one stage's report."""
    model_state = stage["model_bytes"] + stage["trainable_bytes"] + stage["optimizer_bytes"]
    cache = stage.get("stashed_weight_versions", 0) * stage["trainable_bytes"]
    act = stage["peak_activation_bytes"]
    out = {
        "model_state_bytes": model_state,
        "weight_cache_bytes": cache,
        "activation_bytes": act,
        "peak_bytes": model_state + cache + act,
        "peak_rss_bytes": stage["peak_rss_bytes"],
    }
    if "peak_cuda_bytes" in stage:
        out["peak_cuda_bytes"] = stage["peak_cuda_bytes"]
    return out


def summarize(per_stage: list[dict[str, int]]) -> dict[str, float]:
    n = len(per_stage)
    return {
        "mean_peak_bytes": sum(s["peak_bytes"] for s in per_stage) / n,
        "max_peak_bytes": max(s["peak_bytes"] for s in per_stage),
        "mean_activation_bytes": sum(s["activation_bytes"] for s in per_stage) / n,
        "max_activation_bytes": max(s["activation_bytes"] for s in per_stage),
        "mean_model_state_bytes": sum(s["model_state_bytes"] for s in per_stage) / n,
        "mean_weight_cache_bytes": sum(s["weight_cache_bytes"] for s in per_stage) / n,
    }


def reductions(results: dict[str, Any]) -> dict[str, dict[str, dict[str, float | None]]]:
    """ZeroLock vs each baseline: ours beside the paper's."""
    z = results.get("zerolock")
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    if z is None:
        return out
    keys = {"mean_peak": "mean_peak_bytes", "max_peak": "max_peak_bytes", "activation": "mean_activation_bytes"}
    for name, key in keys.items():
        out[name] = {
            b: {
                "ours": z["summary"][key] / r["summary"][key] - 1.0 if r["summary"][key] else None,
                "paper": paper.MEMORY_VS[name].get(b),
            }
            for b, r in results.items()
            if b != "zerolock"
        }
    out["throughput"] = {
        b: {
            "ours": z["samples_per_s"] / r["samples_per_s"] - 1.0 if r["samples_per_s"] else None,
            "paper": paper.THROUGHPUT_VS.get(b),
        }
        for b, r in results.items()
        if b != "zerolock"
    }
    return out


def run_memory(
    settings: BenchSettings,
    *,
    runs: PipelineRuns,
    out: Path,
    stages: int,
    batch: int,
    microbatches: int,
    methods: tuple[str, ...] = METHODS,
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    runs.prefetch(
        [settings.pipeline(method=m, stages=stages, batch=batch, microbatches=microbatches, out=out) for m in methods]
    )
    for method in methods:
        o = runs.run(settings.pipeline(method=method, stages=stages, batch=batch, microbatches=microbatches, out=out))
        per_stage = [stage_breakdown(s) for s in o.per_stage]
        results[method] = {
            "per_stage": per_stage,
            "summary": summarize(per_stage),
            "peak_inflight": [s["peak_inflight_microbatches"] for s in o.per_stage],
            "stashed_weight_versions": [s.get("stashed_weight_versions", 0) for s in o.per_stage],
            "samples_per_s": o.metrics["throughput_samples_per_s"],
            "run": str(o.dir),
        }
    return {
        **report_header("memory", settings),
        "config": {
            "stages": stages,
            "batch": batch,
            "microbatches": microbatches,
            "oversubscribed": oversubscribed(stages=stages, threads=settings.threads, device=settings.device),
        },
        "paper": paper.SOURCE,
        "results": results,
        "vs": reductions(results),
    }


def format_report(report: dict[str, Any]) -> str:
    c, res = report["config"], report["results"]
    lines = [
        f"machine: {report['machine']}",
        f"K={c['stages']}, b={c['batch']}, m={c['microbatches']}; MiB per stage (stage 0, 1, ...)",
    ]
    rows = []
    for m, r in res.items():
        ps = r["per_stage"]
        rows.append(
            [
                m,
                " / ".join(mib(s["peak_bytes"]) for s in ps),
                mib(r["summary"]["mean_peak_bytes"]),
                mib(r["summary"]["max_peak_bytes"]),
                " / ".join(mib(s["model_state_bytes"]) for s in ps),
                " / ".join(mib(s["weight_cache_bytes"]) for s in ps),
                " / ".join(mib(s["activation_bytes"]) for s in ps),
                str(r["peak_inflight"]),
                " / ".join(f"{s['peak_rss_bytes'] / 2**20:.0f}" for s in ps),
            ]
        )
    lines.append(
        markdown_table(
            [
                "method",
                "peak",
                "mean",
                "max",
                "model+state",
                "weight cache",
                "activations",
                "in-flight",
                "RSS (process)",
            ],
            rows,
        )
    )
    vs = report["vs"]
    if vs:
        lines.append("ZeroLock vs baseline, ours (paper):")
        names = {
            "mean_peak": "mean per-stage peak",
            "max_peak": "max-stage peak",
            "activation": "activation memory (mean)",
            "throughput": "throughput",
        }
        base = [b for b in res if b != "zerolock"]
        rows = [[names[k]] + [f"{pct(vs[k][b]['ours'])} (paper {pct(vs[k][b]['paper'])})" for b in base] for k in names]
        lines.append(markdown_table(["figure"] + [f"vs {b}" for b in base], rows))
        if c["oversubscribed"]:
            lines.append(
                f"throughput: {c['stages']} stage processes on fewer cores (oversubscribed, see the README's Fairness rule): "
                "not a fair throughput comparison; see `zerolock bench throughput` for the simulator's."
            )
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    import plotly.graph_objects as go

    res = report["results"]
    parts = [
        ("model_state_bytes", "model + state"),
        ("weight_cache_bytes", "weight cache"),
        ("activation_bytes", "activations"),
    ]
    fig = go.Figure()
    for key, label in parts:
        x = [
            [m for m in res for _ in res[m]["per_stage"]],
            [f"stage {i}" for m in res for i in range(len(res[m]["per_stage"]))],
        ]
        fig.add_trace(go.Bar(name=label, x=x, y=[s[key] / 2**20 for m in res for s in res[m]["per_stage"]]))
    c = report["config"]
    fig.update_layout(
        barmode="stack",
        yaxis_title="MiB",
        title=f"Per-stage peak memory, K={c['stages']}, b={c['batch']}, m={c['microbatches']} ({report['machine']})",
    )
    summary = go.Figure(
        [
            go.Bar(name=label, x=list(res), y=[r["summary"][key] / 2**20 for r in res.values()])
            for key, label in (("mean_peak_bytes", "mean over stages"), ("max_peak_bytes", "max over stages"))
        ]
    )
    summary.update_layout(
        barmode="group", yaxis_title="MiB", title="Peak memory per stage: mean and max (cf. paper Fig. 4)"
    )
    return {"memory_per_stage": fig, "memory_mean_max": summary}


def register(p: argparse.ArgumentParser) -> None:
    add_common_flags(p, steps=3)
    add_shape_flags(p, stages=3)
    register_experiment(p, Experiment(
        name="memory", run=run_memory, figures=figures, format_report=format_report,
        arguments=lambda a, out: dict(shape(a), runs=pipeline_runs(a, out), out=out)))
