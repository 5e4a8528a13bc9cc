"""`zerolock bench memory` (paper Fig. 4): per-stage peak memory of the four methods at b=8, m=4, K=3,
broken down into model + optimizer state, stashed weight versions, and activations.

Bytes are counted, not estimated: parameters and optimizer state from the stage's tensors,
PipeDream's weight cache as (peak stashed versions × trainable bytes), activations by the
engine's saved-tensor meter (its peak, transients inside an action included). The per-stage peak
is their sum. The process RSS high-water mark is shown too; it includes the interpreter and the
torch runtime (hundreds of MiB), which dwarf a tiny model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import paper, plots
from .common.machine import oversubscribed
from .common.experiment import Experiment
from .common.pipeline_runs import PipelineRuns
from .common.settings import METHODS, BenchSettings, report_header
from .common.table import markdown_table, mib, pct, preamble


def stage_breakdown(stage: dict[str, Any]) -> dict[str, int]:
    """Model + state (all parameters, their gradients' worth for the trainable ones, optimizer
    state), the weight cache, and the activation peak of one stage's report."""
    model_state = stage["model_bytes"] + stage["trainable_bytes"] + stage["optimizer_bytes"]
    cache = stage.get("stashed_weight_versions", 0) * stage["trainable_bytes"]
    act = stage["peak_activation_bytes"]
    out = {"model_state_bytes": model_state, "weight_cache_bytes": cache, "activation_bytes": act,
           "peak_bytes": model_state + cache + act, "peak_rss_bytes": stage["peak_rss_bytes"]}
    if "peak_cuda_bytes" in stage:
        out["peak_cuda_bytes"] = stage["peak_cuda_bytes"]
    return out


def summarize(per_stage: list[dict[str, int]]) -> dict[str, float]:
    column = lambda key: [s[key] for s in per_stage]  # noqa: E731
    mean = lambda key: sum(column(key)) / len(per_stage)  # noqa: E731
    return {"mean_peak_bytes": mean("peak_bytes"), "max_peak_bytes": max(column("peak_bytes")),
            "mean_activation_bytes": mean("activation_bytes"), "max_activation_bytes": max(column("activation_bytes")),
            "mean_model_state_bytes": mean("model_state_bytes"), "mean_weight_cache_bytes": mean("weight_cache_bytes")}


def reductions(results: dict[str, Any]) -> dict[str, dict[str, dict[str, float | None]]]:
    """ZeroLock vs each baseline: ours beside the paper's."""
    z = results.get("zerolock")
    if z is None:
        return {}
    keys = {"mean_peak": "mean_peak_bytes", "max_peak": "max_peak_bytes", "activation": "mean_activation_bytes",
            "throughput": None}  # None: the runs' throughput
    value = lambda r, key: r["summary"][key] if key else r["samples_per_s"]  # noqa: E731
    return {name: {b: {"ours": value(z, key) / value(r, key) - 1.0 if value(r, key) else None,
                       "paper": (paper.MEMORY_VS[name] if key else paper.THROUGHPUT_VS).get(b)}
                   for b, r in results.items() if b != "zerolock"}
            for name, key in keys.items()}


def run_memory(settings: BenchSettings, *, runs: PipelineRuns, out: Path, stages: int, batch: int, microbatches: int,
               methods: tuple[str, ...] = METHODS) -> dict[str, Any]:
    geometry = dict(stages=stages, batch=batch, microbatches=microbatches)
    results: dict[str, Any] = {}
    for method, o in zip(methods, runs.outcomes([settings.pipeline(method=m, **geometry, out=out) for m in methods])):
        per_stage = [stage_breakdown(s) for s in o.per_stage]
        results[method] = {"per_stage": per_stage, "summary": summarize(per_stage),
                           "peak_inflight": [s["peak_inflight_microbatches"] for s in o.per_stage],
                           "stashed_weight_versions": [s.get("stashed_weight_versions", 0) for s in o.per_stage],
                           "samples_per_s": o.metrics.throughput_samples_per_s, "run": str(o.dir)}
    return {
        **report_header("memory", settings),
        "config": {**geometry, "oversubscribed": oversubscribed(stages=stages, threads=settings.threads,
                                                                device=settings.device)},
        "paper": paper.SOURCE,
        "results": results,
        "vs": reductions(results),
    }


def format_report(report: dict[str, Any]) -> str:
    c, res, vs = report["config"], report["results"], report["vs"]
    lines = preamble(report, f"K={c['stages']}, b={c['batch']}, m={c['microbatches']}; MiB per stage (stage 0, 1, ...)")
    rows = []
    for m, r in res.items():
        per = lambda key, size=mib: " / ".join(size(s[key]) for s in r["per_stage"])  # noqa: E731
        rows.append([m, per("peak_bytes"), mib(r["summary"]["mean_peak_bytes"]), mib(r["summary"]["max_peak_bytes"]),
                     per("model_state_bytes"), per("weight_cache_bytes"), per("activation_bytes"),
                     str(r["peak_inflight"]), per("peak_rss_bytes", lambda n: f"{n / 2**20:.0f}")])
    lines.append(markdown_table(["method", "peak", "mean", "max", "model+state", "weight cache", "activations",
                                 "in-flight", "RSS (process)"], rows))
    if vs:
        lines.append("ZeroLock vs baseline, ours (paper):")
        names = {"mean_peak": "mean per-stage peak", "max_peak": "max-stage peak",
                 "activation": "activation memory (mean)", "throughput": "throughput"}
        base = [b for b in res if b != "zerolock"]
        rows = [[names[k]] + [f"{pct(vs[k][b]['ours'])} (paper {pct(vs[k][b]['paper'])})" for b in base] for k in names]
        lines.append(markdown_table(["figure"] + [f"vs {b}" for b in base], rows))
        if c["oversubscribed"]:
            lines.append(f"throughput: {c['stages']} stage processes on fewer cores (oversubscribed, see docs/results.md's "
                         "Fairness rule): not a fair throughput comparison; see `zerolock bench throughput` for the "
                         "simulator's.")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    res, c = report["results"], report["config"]
    stages = [(m, i, s) for m in res for i, s in enumerate(res[m]["per_stage"])]
    x = [[m for m, _, _ in stages], [f"stage {i}" for _, i, _ in stages]]
    parts = (("model_state_bytes", "model + state"), ("weight_cache_bytes", "weight cache"),
             ("activation_bytes", "activations"))
    per_stage = plots.figure(  # each bar in its method's colour, the parts told apart by fill pattern
        [plots.method_bars(label, x, [s[key] / 2**20 for _, _, s in stages], methods=x[0], pattern=i)
         for i, (key, label) in enumerate(parts)],
        barmode="stack", yaxis_title="MiB",
        title=f"Per-stage peak memory, K={c['stages']}, b={c['batch']}, m={c['microbatches']} ({report['machine']})")
    summary = plots.figure(
        [plots.method_bars(label, list(res), [r["summary"][key] / 2**20 for r in res.values()], pattern=i)
         for i, (key, label) in enumerate((("mean_peak_bytes", "mean over stages"),
                                           ("max_peak_bytes", "max over stages")))],
        barmode="group", yaxis_title="MiB", title="Peak memory per stage: mean and max (cf. paper Fig. 4)")
    return {"memory_per_stage": per_stage, "memory_mean_max": summary}


EXPERIMENT = Experiment(name="memory", run=run_memory, figures=figures, format_report=format_report, steps=3,
                        shape={"stages": 3}, out=True)
register = EXPERIMENT.register
