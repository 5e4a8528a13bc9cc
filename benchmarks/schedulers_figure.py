"""The lesson of `bench schedulers` in one figure: why a better schedule cannot do what a local objective does.

Three panels over K, one line per method (simulated with probed costs), its measured K points as crosses in
its colour: throughput against 1F1B, the bubble fraction, and the micro-batches a stage holds (activation
memory). ZB-H1 narrows 1F1B's bubble by what W it can defer; ZeroLock has no backward wait to narrow.
"""
from __future__ import annotations

from typing import Any

from zerolock_core.viz.palette import method_colour
from .common import plots
from .schedulers import simulated_rows

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
