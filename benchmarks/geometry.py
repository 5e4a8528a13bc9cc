"""`zerolock bench geometry` (paper Fig. 5): peak activation memory and throughput over a grid of
physical batch b and micro-batch size b/m.

Activation peaks are measured (the engine's saved-tensor meter). Throughput is measured too; at
K > cores the runs are oversubscribed and the quoted number is the simulator's (see `throughput`).
1F1B needs m >= K: cells with fewer micro-batches are skipped for it, and say so.
"""

from __future__ import annotations

import argparse
from typing import Any

from zerolock_core.schedule import schedulable
from zerolock_core.config.arg_types import ints_arg
from zerolock_core.viz.palette import method_colour
from .common import paper, plots
from .common.measure import Probes, best_estimate, measure_all
from .common.experiment import Experiment
from .common.pipeline_runs import PipelineRuns
from .common.settings import METHODS, BenchSettings, report_header
from .common.table import markdown_table, mib, preamble


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


def run_geometry(settings: BenchSettings, *, runs: PipelineRuns, stages: int, batches: tuple[int, ...],
                 sizes: tuple[int, ...], methods: tuple[str, ...] = METHODS, simulate: bool = True,
                 microbatches: int | None = None) -> dict[str, Any]:
    """Every (b, m) of `grid`; with `microbatches` set, m is fixed and b = m × b/m."""
    cells, skipped, cases = grid(batches, sizes, microbatches), [], []
    for b, m in cells:
        for method in methods:
            if schedulable(method, stages=stages, microbatches=m):
                cases.append(dict(method=method, stages=stages, batch=b, microbatches=m))
            else:
                skipped.append({"method": method, "batch": b, "microbatches": m, "why": f"1F1B needs m >= K={stages}"})
    rows = measure_all(settings, runs=runs, probes=Probes(settings=settings) if simulate else None, cases=cases)
    for row in rows:
        b, m, peaks = row["batch"], row["microbatches"], row["measured"]["peak_activation_bytes"]
        quoted, source = best_estimate(row)
        row.update(microbatch_size=b // m, max_activation_bytes=max(peaks),
                   mean_activation_bytes=sum(peaks) / len(peaks), quoted_samples_per_s=quoted, quoted_from=source,
                   series=f"b = {b}" if microbatches is None else f"m = {m}")
    return {
        **report_header("geometry", settings),
        "config": {
            "stages": stages,
            "batches": list(batches) if microbatches is None else sorted({b for b, _ in cells}),
            "microbatch_sizes": list(sizes),
            "fixed_microbatches": microbatches,
        },
        "paper": paper.DIRECTIONS["geometry"],
        "results": rows,
        "skipped": skipped,
    }


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    fixed = f", m fixed at {c['fixed_microbatches']}" if c.get("fixed_microbatches") else f", b in {c['batches']}"
    lines = preamble(report, f"K={c['stages']}{fixed}; activation MiB (max stage / mean); samples/s quoted "
                             "(measured where K <= cores, else simulated)")
    rows = [[r["batch"], r["microbatch_size"], r["microbatches"], r["method"], mib(r["max_activation_bytes"]),
             mib(r["mean_activation_bytes"]), str(r["measured"]["peak_inflight"]),
             f"{r['quoted_samples_per_s']:.1f} ({r['quoted_from']})"] for r in report["results"]]
    lines.append(markdown_table(["b", "b/m", "m", "method", "max act", "mean act", "in-flight", "samples/s"], rows))
    lines += [f"skipped {s['method']} at b={s['batch']}, m={s['microbatches']}: {s['why']}" for s in report["skipped"]]
    lines.append(f"paper: {report['paper']}")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    res, k = report["results"], report["config"]["stages"]

    def series_of(r: dict[str, Any]) -> str:
        return r.get("series", f"b = {r['batch']}")

    series = list(dict.fromkeys(map(series_of, res)))
    methods = [m for m in METHODS if any(r["method"] == m for r in res)]
    figs = {}
    for name, value, y_title, title in (
            ("geometry_memory", lambda r: r["max_activation_bytes"] / 2**20, "max-stage activation peak (MiB)",
             f"Activation memory vs micro-batch size, K={k} (cf. paper Fig. 5)"),
            ("geometry_throughput", lambda r: r["quoted_samples_per_s"], "samples/s",
             f"Throughput vs micro-batch size, K={k}")):
        fig = plots.panels(series, shared_yaxes=True)
        for i, s in enumerate(series, start=1):
            for m in methods:
                pts = sorted((r for r in res if series_of(r) == s and r["method"] == m),
                             key=lambda r: r["microbatch_size"])
                fig.add_trace(plots.curve(m, [r["microbatch_size"] for r in pts], map(value, pts),
                                          color=method_colour(m), showlegend=i == 1), row=1, col=i)
            fig.update_xaxes(title_text="b/m", type="log", row=1, col=i)
        figs[name] = fig.update_yaxes(title_text=y_title, row=1, col=1).update_layout(title=title)
    return figs


EXPERIMENT = Experiment(name="geometry", run=run_geometry, figures=figures, format_report=format_report, steps=3,
                        shape=dict(stages=3, batch=None, microbatches=None),
                        arguments=lambda a, out: dict(batches=a.batches, sizes=a.microbatch_sizes,
                                                      simulate=not a.no_simulate))


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--batches", type=ints_arg, default=(8,), help="physical batch sizes b")
    p.add_argument("--microbatch-sizes", type=ints_arg, default=(1, 2, 4), help="b/m values")
    p.add_argument("--microbatches", type=int, default=None,
                   help="fix m and grow b = m × b/m instead of fixing b (--batches is then ignored)")
    p.add_argument("--no-simulate", action="store_true")
