"""`zerolock bench geometry` (paper Fig. 5): peak activation memory and throughput over a grid of
physical batch b and micro-batch size b/m.

Activation peaks are measured (the engine's saved-tensor meter). Throughput is measured too; at
K > cores the runs are oversubscribed and the quoted number is the simulator's (see `throughput`).
1F1B needs m >= K: cells with fewer micro-batches are skipped for it, and say so.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import paper
from .measure import Probes, best_estimate, measure_and_predict
from .runner import Experiment, add_shape_flags, pipeline_runs, shape, register_experiment
from .runs import PipelineRuns
from .settings import (
    METHOD_COLOURS,
    METHODS,
    BenchSettings,
    add_common_flags,
    ints_arg,
    report_header,
)
from .table import markdown_table, mib


def grid(batches: tuple[int, ...], sizes: tuple[int, ...], microbatches: int | None = None) -> list[tuple[int, int]]:
    """(b, m) for every b and micro-batch size b/m that divides it; with `microbatches` fixed, b = m × b/m
    for every size instead (the batch grows with the micro-batch size)."""
    if microbatches is not None:
        if microbatches < 1:
            raise ValueError(f"--microbatches must be at least 1 (got {microbatches})")
        return [(microbatches * s, microbatches) for s in sizes]
    cells = [(b, b // s) for b in batches for s in sizes if b % s == 0]
    if not cells:
        raise ValueError(f"no micro-batch size in {list(sizes)} divides a batch in {list(batches)}")
    return cells


def run_geometry(
    settings: BenchSettings,
    *,
    runs: PipelineRuns,
    stages: int,
    batches: tuple[int, ...],
    sizes: tuple[int, ...],
    methods: tuple[str, ...] = METHODS,
    simulate: bool = True,
    microbatches: int | None = None,
) -> dict[str, Any]:
    """Every (b, m) of `grid`; with `microbatches` set, m is fixed and b = m × b/m."""
    probes = Probes(settings=settings) if simulate else None
    cells, skipped = [], []
    runs.prefetch(
        [
            settings.pipeline(method=method, stages=stages, batch=b, microbatches=m, out=runs.root)
            for b, m in grid(batches, sizes, microbatches)
            for method in methods
            if not (method == "1f1b" and m < stages)
        ]
    )
    for b, m in grid(batches, sizes, microbatches):
        for method in methods:
            if method == "1f1b" and m < stages:
                skipped.append({"method": method, "batch": b, "microbatches": m, "why": f"1F1B needs m >= K={stages}"})
                continue
            row = measure_and_predict(
                settings, runs=runs, probes=probes, method=method, stages=stages, batch=b, microbatches=m
            )
            peaks = row["measured"]["peak_activation_bytes"]
            row.update(
                microbatch_size=b // m,
                max_activation_bytes=max(peaks),
                mean_activation_bytes=sum(peaks) / len(peaks),
                quoted_samples_per_s=best_estimate(row)[0],
                quoted_from=best_estimate(row)[1],
                series=f"b = {b}" if microbatches is None else f"m = {m}",
            )
            cells.append(row)
    return {
        **report_header("geometry", settings),
        "config": {
            "stages": stages,
            "batches": list(batches)
            if microbatches is None
            else sorted({b for b, _ in grid(batches, sizes, microbatches)}),
            "microbatch_sizes": list(sizes),
            "fixed_microbatches": microbatches,
        },
        "paper": paper.DIRECTIONS["geometry"],
        "results": cells,
        "skipped": skipped,
    }


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = [
        f"machine: {report['machine']}",
        f"K={c['stages']}"
        + (f", m fixed at {c['fixed_microbatches']}" if c.get("fixed_microbatches") else f", b in {c['batches']}")
        + "; activation MiB (max stage / mean); samples/s quoted (measured where K <= cores, else simulated)",
    ]
    rows = [
        [
            r["batch"],
            r["microbatch_size"],
            r["microbatches"],
            r["method"],
            mib(r["max_activation_bytes"]),
            mib(r["mean_activation_bytes"]),
            str(r["measured"]["peak_inflight"]),
            f"{r['quoted_samples_per_s']:.1f} ({r['quoted_from']})",
        ]
        for r in report["results"]
    ]
    lines.append(markdown_table(["b", "b/m", "m", "method", "max act", "mean act", "in-flight", "samples/s"], rows))
    for s in report["skipped"]:
        lines.append(f"skipped {s['method']} at b={s['batch']}, m={s['microbatches']}: {s['why']}")
    lines.append(f"paper: {report['paper']}")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    res = report["results"]
    series = list(dict.fromkeys(r.get("series", f"b = {r['batch']}") for r in res))
    methods = [m for m in METHODS if any(r["method"] == m for r in res)]
    mem = make_subplots(rows=1, cols=len(series), subplot_titles=series, shared_yaxes=True)
    tput = make_subplots(rows=1, cols=len(series), subplot_titles=series, shared_yaxes=True)
    colors = METHOD_COLOURS
    for i, name in enumerate(series, start=1):
        for m in methods:
            pts = sorted(
                (
                    (r["microbatch_size"], r)
                    for r in res
                    if r.get("series", f"b = {r['batch']}") == name and r["method"] == m
                ),
                key=lambda p: p[0],
            )
            x = [p[0] for p in pts]
            mem.add_trace(
                go.Scatter(
                    x=x,
                    y=[p[1]["max_activation_bytes"] / 2**20 for p in pts],
                    name=m,
                    line={"color": colors[m]},
                    showlegend=i == 1,
                    mode="lines+markers",
                ),
                row=1,
                col=i,
            )
            tput.add_trace(
                go.Scatter(
                    x=x,
                    y=[p[1]["quoted_samples_per_s"] for p in pts],
                    name=m,
                    line={"color": colors[m]},
                    showlegend=i == 1,
                    mode="lines+markers",
                ),
                row=1,
                col=i,
            )
        mem.update_xaxes(title_text="b/m", type="log", row=1, col=i)
        tput.update_xaxes(title_text="b/m", type="log", row=1, col=i)
    mem.update_yaxes(title_text="max-stage activation peak (MiB)", row=1, col=1)
    tput.update_yaxes(title_text="samples/s", row=1, col=1)
    k = report["config"]["stages"]
    mem.update_layout(title=f"Activation memory vs micro-batch size, K={k} (cf. paper Fig. 5)")
    tput.update_layout(title=f"Throughput vs micro-batch size, K={k}")
    return {"geometry_memory": mem, "geometry_throughput": tput}


def register(p: argparse.ArgumentParser) -> None:
    add_common_flags(p, steps=3)
    add_shape_flags(p, stages=3, batch=None, microbatches=None)
    p.add_argument("--batches", type=ints_arg, default=(8,), help="physical batch sizes b")
    p.add_argument("--microbatch-sizes", type=ints_arg, default=(1, 2, 4), help="b/m values")
    p.add_argument(
        "--microbatches",
        type=int,
        default=None,
        help="fix m and grow b = m × b/m instead of fixing b (--batches is then ignored)",
    )
    p.add_argument("--no-simulate", action="store_true")
    register_experiment(p, Experiment(
        name="geometry", run=run_geometry, figures=figures, format_report=format_report,
        arguments=lambda a, out: dict(shape(a), runs=pipeline_runs(a, out), batches=a.batches,
                                      sizes=a.microbatch_sizes, simulate=not a.no_simulate)))
