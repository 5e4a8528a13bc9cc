"""`zerolock bench links` (paper Fig. 6b): throughput of the four methods per emulated link profile.

The transport delays every real transfer by the profile's model (bytes / bandwidth on a hop that
serialises its messages, plus latency), so the measured runs pay the link for real; BP methods
ship a gradient back for every hidden state, ZeroLock only hidden states. K defaults to 2 so the
stages have a core each; larger K is labelled oversubscribed and quoted from the simulator.
"""

from __future__ import annotations

import argparse
from typing import Any

from zerolock_core.config import LinkConfig
from . import paper
from .measure import Probes, best_estimate, measure_and_predict
from .prediction import link_for
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
from .throughput import advantage

PROFILES = ("local", "wifi", "mobile", "constrained")


def profiles_arg(text: str) -> tuple[str, ...]:
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in PROFILES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"--profiles: {', '.join(bad) or '(none)'} not in {', '.join(PROFILES)}")
    return names


def run_links(
    settings: BenchSettings,
    *,
    runs: PipelineRuns,
    stages: int,
    batch: int,
    microbatches: int,
    profiles: tuple[str, ...] = PROFILES,
    methods: tuple[str, ...] = METHODS,
    simulate: bool = True,
) -> dict[str, Any]:
    probes = Probes(settings=settings) if simulate else None
    res: dict[str, Any] = {}
    runs.prefetch(
        [
            settings.pipeline(
                method=m,
                stages=stages,
                batch=batch,
                microbatches=microbatches,
                link=LinkConfig(profile=p),
                out=runs.root,
            )
            for p in profiles
            for m in methods
        ]
    )
    for prof in profiles:
        link = LinkConfig(profile=prof)
        model = link_for(link)
        rows = [
            measure_and_predict(
                settings,
                runs=runs,
                probes=probes,
                method=m,
                stages=stages,
                batch=batch,
                microbatches=microbatches,
                link=link,
            )
            for m in methods
        ]
        res[prof] = {
            "bandwidth_mbps": model.bandwidth_bytes_per_s * 8 / 1e6,
            "latency_ms": model.latency_s * 1e3,
            "rows": rows,
            "zerolock_vs": advantage(rows),
        }
    return {
        **report_header("links", settings),
        "config": {"stages": stages, "batch": batch, "microbatches": microbatches},
        "paper": paper.DIRECTIONS["links"],
        "results": res,
    }


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = [
        f"machine: {report['machine']}",
        f"K={c['stages']}, b={c['batch']}, m={c['microbatches']}; samples/s after the first window "
        "(measured with the link emulated on the real transfers; simulated in brackets)",
    ]
    res = report["results"]
    methods = [r["method"] for r in next(iter(res.values()))["rows"]]
    rows = []
    for prof, b in res.items():
        cells = []
        for r in b["rows"]:
            meas = r.get("measured", {}).get("samples_per_s")
            sim = r.get("predicted", {}).get("samples_per_s")
            star = "*" if r["oversubscribed"] else ""
            cells.append(f"{meas:.1f}{star} (sim {sim:.1f})" if sim is not None else f"{meas:.1f}{star}")
        rows.append([f"{prof} ({b['bandwidth_mbps']:.0f} Mbps, {b['latency_ms']:.0f} ms)", *cells])
    lines.append(markdown_table(["link", *methods], rows))
    base = ("gpipe", "1f1b", "pipedream")
    adv = []
    for p, b in res.items():
        for source in ("measured", "predicted"):
            vs = advantage(b["rows"], source)
            if vs:
                label = "simulated" if source == "predicted" else source
                label += " (oversubscribed)" if source == "measured" and b["rows"][0]["oversubscribed"] else ""
                adv.append([p, label, *[pct(vs.get(m)) for m in base]])
    lines.append("ZeroLock throughput vs baseline:")
    lines.append(markdown_table(["link", "from", "vs gpipe", "vs 1f1b", "vs pipedream"], adv))
    lines.append(f"paper: {report['paper']}")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    import plotly.graph_objects as go

    res = report["results"]
    methods = [r["method"] for r in next(iter(res.values()))["rows"]]
    fig = go.Figure()
    for i, m in enumerate(methods):
        fig.add_trace(
            go.Bar(
                name=m,
                x=list(res),
                y=[best_estimate(b["rows"][i])[0] for b in res.values()],
                marker_color=METHOD_COLOURS[m],
                offsetgroup=m,
            )
        )
        if all("predicted" in b["rows"][i] for b in res.values()):
            fig.add_trace(
                go.Scatter(
                    name=f"{m} simulated",
                    x=list(res),
                    mode="markers",
                    offsetgroup=m,
                    marker={"symbol": "x", "size": 10, "color": "black"},
                    y=[b["rows"][i]["predicted"]["samples_per_s"] for b in res.values()],
                )
            )
    c = report["config"]
    fig.update_layout(
        barmode="group",
        scattermode="group",
        yaxis_title="samples/s",
        title=f"Throughput per link profile, K={c['stages']} (cf. paper Fig. 6b); bars measured, x simulated",
    )
    adv = go.Figure(
        [
            go.Scatter(
                name=f"vs {b}",
                x=list(res),
                y=[100 * r["zerolock_vs"].get(b, float("nan")) for r in res.values()],
                mode="lines+markers",
                line={"color": METHOD_COLOURS[b]},
            )
            for b in ("gpipe", "1f1b", "pipedream")
        ]
    )
    adv.update_layout(yaxis_title="ZeroLock throughput gain (%)", title="ZeroLock's advantage as the link slows")
    return {"links_throughput": fig, "links_advantage": adv}


def register(p: argparse.ArgumentParser) -> None:
    add_common_flags(p, steps=4)
    add_shape_flags(p, stages=2)
    p.add_argument("--profiles", type=profiles_arg, default=PROFILES)
    p.add_argument("--no-simulate", action="store_true")
    register_experiment(p, Experiment(
        name="links", run=run_links, figures=figures, format_report=format_report,
        arguments=lambda a, out: dict(shape(a), runs=pipeline_runs(a, out), profiles=a.profiles,
                                      simulate=not a.no_simulate)))
