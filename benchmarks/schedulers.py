"""`zerolock bench schedulers` (issue 29): ZeroLock against the schedules that shrink the backprop bubble
instead of removing it — ZB-H1 (zero bubble), 1F1B, GPipe — measured side by side, then simulated deeper.

Measured: at K (default 2) every method is a real multi-process run on the same settings, the methods
round-robin (`--repeats`: a burst of other work on a shared machine hits every method alike). Per method:
samples/s after the first window, the bubble fraction the runtime records (metrics.json: 1 − mean active
÷ span), each stage's active fraction, its activation peak (the engine's saved-tensor meter) and its most
micro-batches in flight. Ratios against 1F1B: of the best repeats (the other benchmarks' convention), and
the median of the repeat-by-repeat ratios (each run against the 1F1B run of its own round), the one quoted.

Simulated: at K in `--simulate`, m = 2K micro-batches of the measured size, the simulator costed with
seconds probed in this process on that very K-way split (probe.py: F, B, ZB-H1's split B_input + W,
ZeroLock's own forward and L, STEP; an ideal link): throughput relative to 1F1B, bubble fraction and the
most micro-batches a stage holds (activation memory in micro-batches).

DualPipe-V (simulated only: it puts two chunks on a device, the runtime one stage per process) runs on the
same K devices the model cut 2K ways, costed with seconds probed on the 2K-way split; its micro-batches held
are counted in stages' worth (a chunk's micro-batch is half a stage's), and where the model has fewer than
2K layers its row says so instead.
"""
from __future__ import annotations

import argparse
import statistics
from typing import Any

from zerolock_core.config.arg_types import ints_arg
from zerolock_core.config.run_config import LinkConfig
from zerolock_core.runtime.link_emulation import link_for
from .common import plots
from .common.experiment import Experiment
from .common.machine import oversubscribed
from .common.measure import Probes, depth_cases, measure_all, skip_windows
from .common.pipeline_runs import PipelineRuns
from .common.prediction import predict
from .common.settings import BenchSettings, report_header
from .common.table import joined, markdown_table, mib, pct, preamble
from zerolock_core.schedule.dualpipe_v import DUALPIPE_V
from zerolock_core.viz.palette import method_colour

SCHEDULERS = ("zerolock", "zb-h1", "1f1b", "gpipe")
SIMULATED_ONLY = (DUALPIPE_V,)  # two chunks per device: schedule data and the simulator, not the runtime
BASELINE = "1f1b"  # every ratio is against it: the schedule ZB-H1 improves on, at the same peak memory
MICROBATCHES_PER_STAGE = 2  # the simulated m = 2K (as `bench simulator`'s extrapolation)
SIMULATE_AT = (2, 3, 4, 8)


def ratio(value: float, base: float) -> float | None:
    return value / base - 1.0 if base > 0 else None


def measure_side_by_side(settings: BenchSettings, *, runs: PipelineRuns, stages: int, batch: int, microbatches: int,
                         methods: tuple[str, ...]) -> dict[str, Any]:
    rows = measure_all(settings, runs=runs, probes=None,
                       cases=depth_cases((stages,), methods, batch=batch, microbatches=microbatches))
    results = {r["method"]: r["measured"] for r in rows}
    base = results[BASELINE]
    for r in results.values():
        r["vs_1f1b_best"] = ratio(r["samples_per_s"], base["samples_per_s"])
        paired = [ratio(x, b) for x, b in zip(r["samples_per_s_every_repeat"], base["samples_per_s_every_repeat"])]
        r["vs_1f1b_every_repeat"] = paired
        r["vs_1f1b"] = statistics.median(p for p in paired if p is not None) if any(p is not None for p in paired) \
            else None
    return {"stages": stages, "batch": batch, "microbatches": microbatches, "repeats": runs.repeats,
            "oversubscribed": oversubscribed(stages=stages, threads=settings.threads, device=settings.device),
            "results": results}


def simulate_depths(settings: BenchSettings, *, depths: tuple[int, ...], microbatch_size: int,
                    methods: tuple[str, ...], simulated_only: tuple[str, ...] = SIMULATED_ONLY) -> dict[str, Any]:
    probes, rows, probed = Probes(settings=settings), [], []
    for k in dict.fromkeys(depths):
        m = MICROBATCHES_PER_STAGE * k
        geometry = dict(stages=k, batch=m * microbatch_size, microbatches=m)
        p = probes.get(**geometry)
        probed.append({"stages": k, "layers": p.layers, "per_stage": {str(s): c for s, c in p.per_stage.items()},
                       "w_share": [c["W"] / (c["B_input"] + c["W"]) for c in p.per_stage.values()]})
        block = {method: predict(method=method, **geometry, windows=settings.steps, costs=p.costs(method),
                                 link=link_for(LinkConfig()), inflight_limit=settings.inflight_depth,
                                 skip_windows=skip_windows(settings.steps))
                 for method in methods}
        for method, pred in block.items():
            rows.append({"stages": k, "microbatches": m, "method": method, "samples_per_s": pred.samples_per_s,
                         "vs_1f1b": ratio(pred.samples_per_s, block[BASELINE].samples_per_s),
                         "bubble_fraction": pred.bubble_fraction, "active_fraction": list(pred.active_fraction),
                         "peak_inflight": list(pred.inflight_peak)})
        rows += [dualpipe_v_row(settings, probes, devices=k, microbatch_size=microbatch_size,
                                baseline=block[BASELINE].samples_per_s) for _ in simulated_only]
    return {"microbatches_per_stage": MICROBATCHES_PER_STAGE, "link": "ideal", "rows": rows, "probes": probed}


def dualpipe_v_row(settings: BenchSettings, probes: Probes, *, devices: int, microbatch_size: int,
                   baseline: float) -> dict[str, Any]:
    """DualPipe-V on `devices` devices, the model cut into 2 x `devices` chunks probed on that split; its
    held micro-batches per device in stages' worth (half a count per chunk micro-batch)."""
    m = MICROBATCHES_PER_STAGE * devices
    row: dict[str, Any] = {"stages": devices, "chunks": 2 * devices, "microbatches": m, "method": DUALPIPE_V}
    try:
        p = probes.get(stages=2 * devices, batch=m * microbatch_size, microbatches=m)
    except ValueError as err:  # fewer layers than chunks
        return {**row, "skipped": f"{2 * devices} chunks: {err}"}
    pred = predict(method=DUALPIPE_V, stages=devices, batch=m * microbatch_size, microbatches=m,
                   windows=settings.steps, costs=p.costs(DUALPIPE_V), link=link_for(LinkConfig()),
                   inflight_limit=settings.inflight_depth, skip_windows=skip_windows(settings.steps))
    return {**row, "samples_per_s": pred.samples_per_s, "vs_1f1b": ratio(pred.samples_per_s, baseline),
            "bubble_fraction": pred.bubble_fraction, "active_fraction": list(pred.active_fraction),
            "peak_inflight": [n / 2 for n in pred.inflight_peak], "layers": p.layers}


def simulated_rows(report: dict[str, Any], method: str) -> list[dict[str, Any]]:
    """The simulated rows of `method` that ran (a DualPipe-V row is skipped where the model is too short)."""
    return [r for r in report["simulated"]["rows"] if r["method"] == method and "skipped" not in r]


def run_schedulers(settings: BenchSettings, *, runs: PipelineRuns, stages: int, batch: int, microbatches: int,
                   methods: tuple[str, ...] = SCHEDULERS, simulate_at: tuple[int, ...] = SIMULATE_AT) -> dict[str, Any]:
    if BASELINE not in methods:
        raise ValueError(f"--methods must include {BASELINE}: every ratio is against it (got {','.join(methods)})")
    if batch % microbatches:
        raise ValueError(f"--batch ({batch}) must be a multiple of --microbatches ({microbatches})")
    if settings.steps < 2:
        raise ValueError("--steps must be at least 2: the first window is warm-up and is not compared")
    measured = measure_side_by_side(settings, runs=runs, stages=stages, batch=batch, microbatches=microbatches,
                                    methods=methods)
    simulated = simulate_depths(settings, depths=simulate_at, microbatch_size=batch // microbatches, methods=methods)
    # the header after the work: its load average is the one the runs saw
    return {**report_header("schedulers", settings), "model": settings.model, "measured": measured,
            "simulated": simulated}


def format_report(report: dict[str, Any]) -> str:
    meas, sim = report["measured"], report["simulated"]
    lines = preamble(report, f"model {report['model']}, {report['settings']['seq_len']} tokens a sample; measured: "
                             f"K={meas['stages']}, b={meas['batch']}, m={meas['microbatches']}, "
                             f"{report['settings']['steps']} steps, {meas['repeats']} repeats round-robin"
                             + (" (oversubscribed)" if meas["oversubscribed"] else ""))
    lines.append(markdown_table(
        ["method", "samples/s (best)", "vs 1F1B (median of rounds)", "vs 1F1B (best)", "bubble", "active per stage",
         "activation peak MiB per stage", "in flight per stage"],
        [[m, f"{r['samples_per_s']:.1f}", pct(r["vs_1f1b"]), pct(r["vs_1f1b_best"]), f"{r['bubble_fraction']:.1%}",
          joined(r["active_fraction"]), " / ".join(mib(b) for b in r["peak_activation_bytes"]),
          joined(r["peak_inflight"], "d")] for m, r in meas["results"].items()]))
    lines.append(f"SIMULATED: m = {sim['microbatches_per_stage']}K, the seconds of each action probed on the K-way "
                 f"split, {sim['link']} link; throughput vs 1F1B / bubble / most micro-batches a stage holds")
    methods = list(dict.fromkeys(r["method"] for r in sim["rows"]))
    cell = {(r["stages"], r["method"]): r for r in sim["rows"]}

    def text(r: dict[str, Any] | None) -> str:
        if r is None or "skipped" in r:
            return "n/a" if r is None else f"n/a ({r['chunks']} chunks > layers)"
        return f"{pct(r['vs_1f1b'])} / {r['bubble_fraction']:.0%} / {max(r['peak_inflight']):g}"

    rows = [[k, *[text(cell.get((k, m))) for m in methods]] for k in dict.fromkeys(r["stages"] for r in sim["rows"])]
    lines.append(markdown_table(["K", *methods], rows))
    if any(r["method"] == DUALPIPE_V for r in sim["rows"]):
        lines.append("DualPipe-V: on K devices, the model cut into 2K chunks (two per device, in a V), probed on "
                     "that split; its micro-batches held counted in stages' worth (a chunk's is half a stage's)")
    lines.append("W share of ZB-H1's split backward per stage, probed (stage 0 has no input gradient to send: "
                 "all of it is W): " + "; ".join(f"K={p['stages']}: {joined(p['w_share'], '.0%')}"
                                                  for p in sim["probes"]))
    lines.append("ZB-H1's split backward (B_input + W) against one whole backward, per stage, probed: " + "; ".join(
        f"K={p['stages']}: " + joined([c["B_input"] / c["B"] + c["W"] / c["B"] for c in p["per_stage"].values()])
        for p in sim["probes"]))
    return "\n".join(lines)


def format_verdict(reports: list[dict[str, Any]]) -> str:
    """The README's table: per model and method, the measured ratio to 1F1B and the simulated ones over K,
    the simulated bubble and the most micro-batches a stage holds."""
    ks = " / ".join(str(k) for k in dict.fromkeys(x["stages"] for x in reports[0]["simulated"]["rows"]))
    rows = []
    for r in reports:
        methods = dict.fromkeys([*r["measured"]["results"], *(x["method"] for x in r["simulated"]["rows"])])
        for m in methods:
            res = r["measured"]["results"].get(m)
            cells = {x["stages"]: x for x in r["simulated"]["rows"] if x["method"] == m}
            sim = [cells.get(k) for k in dict.fromkeys(x["stages"] for x in r["simulated"]["rows"])]

            def each(fmt) -> str:
                return " / ".join("–" if x is None or "skipped" in x else fmt(x) for x in sim)

            rows.append([r["model"], m, pct(res["vs_1f1b"]) if res else "not run (simulated only)",
                         each(lambda x: pct(x["vs_1f1b"])), each(lambda x: f"{x['bubble_fraction']:.0%}"),
                         each(lambda x: f"{max(x['peak_inflight']):g}")])
    k = reports[0]["measured"]["stages"]
    return markdown_table(["model", "method", f"measured at K={k}: vs 1F1B (median of rounds)",
                           f"simulated vs 1F1B, K = {ks}", "simulated bubble", "micro-batches a stage holds"], rows)


# the lesson in one figure: why a better schedule cannot do what a local objective does. Three panels over K,
# one line per method (simulated with probed costs), its measured K points as crosses in its colour:
# throughput against 1F1B, the bubble fraction, and the micro-batches a stage holds (activation memory).
# ZB-H1 narrows 1F1B's bubble by what W it can defer; ZeroLock has no backward wait to narrow.
PANELS = (
    ("throughput vs 1F1B", lambda r: r["vs_1f1b"], ".0%"),
    ("bubble fraction", lambda r: r["bubble_fraction"], ".0%"),
    ("micro-batches a stage holds (most)", lambda r: max(r["peak_inflight"]), "~g"),
)


def schedulers_figure(report: dict[str, Any]):
    import plotly.graph_objects as go

    sim, meas = report["simulated"]["rows"], report["measured"]
    fig = plots.panels([title for title, _, _ in PANELS])
    methods = list(dict.fromkeys(r["method"] for r in sim))
    for col, (title, value, tick) in enumerate(PANELS, start=1):
        for m in methods:
            rows = simulated_rows(report, m)
            fig.add_trace(plots.curve(f"{m} simulated", [r["stages"] for r in rows], [value(r) for r in rows],
                                      color=method_colour(m), legendgroup=m, showlegend=col == 1), row=1, col=col)
            r = meas["results"].get(m)
            if r is not None and value(r) is not None:
                fig.add_trace(go.Scatter(name=f"{m} measured K={meas['stages']}", x=[meas["stages"]], y=[value(r)],
                                         mode="markers", legendgroup=m, showlegend=col == 1,
                                         marker={"symbol": "x", "size": 13, "color": method_colour(m)}),
                              row=1, col=col)
        fig.update_xaxes(title_text="K (stages)", tickvals=sorted({r["stages"] for r in sim}), row=1, col=col)
        fig.update_yaxes(tickformat=tick, row=1, col=col)
    return fig.update_layout(
        title=f"Why a better schedule cannot do what a local objective does ({report['model']})<br>"
              "<sup>lines: simulated with probed costs, m = 2K; x: measured side by side in one run</sup>",
        width=1300, height=460, legend={"orientation": "h", "y": -0.22})


def figures(report: dict[str, Any]):
    return {"schedulers": schedulers_figure(report)}


EXPERIMENT = Experiment(name="schedulers", run=run_schedulers, format_report=format_report, figures=figures,
                        steps=10, shape={"stages": 2}, defaults={"methods": SCHEDULERS, "repeats": 3},
                        arguments=lambda a, out: dict(simulate_at=a.simulate))


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--simulate", type=ints_arg, default=SIMULATE_AT,
                   help="K values to simulate (m = 2K, costs probed on each K-way split)")
