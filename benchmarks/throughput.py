"""`zerolock bench throughput` (paper Fig. 6a): samples/s and per-stage active fraction for
K in {2, 3, 4} (more where the model's layers allow).

Every cell is a real run. Where K stage processes have fewer cores than they need (the README's Fairness rule:
they take turns and bubbles stop costing time, which flatters the BP baselines) the measured
number is labelled oversubscribed and the quoted number is the simulator's, costed with
per-action times probed in this process; `zerolock bench simulator` shows how well those
predictions match real runs where the cores suffice.
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
    report_header,
)
from .table import markdown_table, pct


def advantage(rows: list[dict[str, Any]], source: str = "quoted") -> dict[str, float]:
    """ZeroLock's throughput over each baseline's, for one configuration, from the `quoted` numbers
    (measured unless oversubscribed), the `measured` ones or the `predicted` (simulated) ones."""
    if source == "quoted":
        value = {r["method"]: best_estimate(r)[0] for r in rows}
    else:
        value = {r["method"]: r[source]["samples_per_s"] for r in rows if source in r}
    z = value.get("zerolock")
    return {m: z / v - 1.0 for m, v in value.items() if m != "zerolock" and z is not None and v > 0}


def run_throughput(
    settings: BenchSettings,
    *,
    runs: PipelineRuns,
    stages: tuple[int, ...],
    batch: int,
    microbatches: int,
    methods: tuple[str, ...] = METHODS,
    simulate: bool = True,
) -> dict[str, Any]:
    probes = Probes(settings=settings) if simulate else None
    by_k: dict[str, Any] = {}
    runs.prefetch(
        [
            settings.pipeline(method=m, stages=k, batch=batch, microbatches=microbatches, out=runs.root)
            for k in stages
            for m in methods
            if not (m == "1f1b" and microbatches < k)
        ]
    )
    for k in stages:
        rows = [
            measure_and_predict(
                settings, runs=runs, probes=probes, method=m, stages=k, batch=batch, microbatches=microbatches
            )
            for m in methods
            if not (m == "1f1b" and microbatches < k)
        ]
        by_k[str(k)] = {"rows": rows, "zerolock_vs": advantage(rows)}
    return {
        **report_header("throughput", settings),
        "config": {"stages": list(stages), "batch": batch, "microbatches": microbatches},
        "paper": paper.DIRECTIONS["throughput"],
        "results": by_k,
    }


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = [
        f"machine: {report['machine']}",
        f"b={c['batch']}, m={c['microbatches']}; samples/s after the first "
        "window; * = oversubscribed (more stage threads than cores): quoted = simulator",
    ]
    rows = []
    for k, block in report["results"].items():
        for r in block["rows"]:
            q, src = best_estimate(r)
            meas = r.get("measured", {})
            rows.append(
                [
                    k,
                    r["method"],
                    f"{meas.get('samples_per_s', 0):.1f}" + ("*" if r["oversubscribed"] else ""),
                    f"{r['predicted']['samples_per_s']:.1f}" if "predicted" in r else "—",
                    f"{q:.1f}",
                    src,
                    " ".join(f"{a:.2f}" for a in meas.get("active_fraction", [])),
                    " ".join(f"{a:.2f}" for a in r.get("predicted", {}).get("active_fraction", [])),
                ]
            )
    lines.append(
        markdown_table(
            ["K", "method", "measured", "simulated", "quoted", "from", "active (measured)", "active (simulated)"], rows
        )
    )
    base = ("gpipe", "1f1b", "pipedream")
    adv = []
    for k, block in report["results"].items():
        over = any(r["oversubscribed"] for r in block["rows"])
        for source, label in (
            ("measured", "measured" + (" (oversubscribed)" if over else "")),
            ("predicted", "simulated"),
        ):
            vs = advantage(block["rows"], source)
            if vs:
                adv.append([k, label, *[pct(vs.get(b)) for b in base]])
    lines.append("ZeroLock throughput vs baseline, measured and simulated (own core per stage):")
    lines.append(markdown_table(["K", "from", "vs gpipe", "vs 1f1b", "vs pipedream"], adv))
    lines.append(f"paper: {report['paper']}")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    import plotly.graph_objects as go

    res = report["results"]
    methods = sorted({r["method"] for b in res.values() for r in b["rows"]}, key=list(METHODS).index)
    fig = go.Figure()
    for m in methods:
        ks, sim, meas = [], [], []
        for k, b in res.items():
            for r in b["rows"]:
                if r["method"] == m:
                    ks.append(f"K={k}" + (" (measured: oversubscribed)" if r["oversubscribed"] else ""))
                    sim.append(r.get("predicted", {}).get("samples_per_s"))
                    meas.append(r.get("measured", {}).get("samples_per_s"))
        fig.add_trace(go.Bar(name=f"{m} simulated", x=ks, y=sim, marker_color=METHOD_COLOURS[m], offsetgroup=m))
        fig.add_trace(
            go.Scatter(
                name=f"{m} measured",
                x=ks,
                y=meas,
                mode="markers",
                offsetgroup=m,
                marker={"symbol": "x", "size": 10, "color": "black"},
            )
        )
    fig.update_layout(
        barmode="group",
        scattermode="group",
        yaxis_title="samples/s",
        title="Throughput vs stages (cf. paper Fig. 6a): bars simulated (probed costs, a core per stage), x measured",
    )
    from plotly.subplots import make_subplots

    act = make_subplots(rows=1, cols=len(res), subplot_titles=[f"K={k}" for k in res], shared_yaxes=True)
    for i, (k, b) in enumerate(res.items(), start=1):
        for r in b["rows"]:
            if "measured" in r:
                act.add_trace(
                    go.Bar(
                        name=r["method"],
                        x=[f"stage {s}" for s in range(len(r["measured"]["active_fraction"]))],
                        y=r["measured"]["active_fraction"],
                        marker_color=METHOD_COLOURS[r["method"]],
                        showlegend=i == 1,
                    ),
                    row=1,
                    col=i,
                )
    act.update_layout(
        barmode="group",
        yaxis_title="active fraction (measured)",
        title="Active fraction per stage, measured (K > cores: oversubscribed)",
    )
    return {"throughput_vs_stages": fig, "active_fraction": act}


def register(p: argparse.ArgumentParser) -> None:
    add_common_flags(p, steps=4)
    add_shape_flags(p, stages=(2, 3, 4))
    p.add_argument("--no-simulate", action="store_true", help="measured numbers only")
    register_experiment(p, Experiment(
        name="throughput", run=run_throughput, figures=figures, format_report=format_report,
        arguments=lambda a, out: dict(shape(a), runs=pipeline_runs(a, out), simulate=not a.no_simulate)))
