"""Figures of one run's numbers: loss curves and eval accuracy per chunk, active vs idle per stage."""
from __future__ import annotations

from typing import Any, Sequence

import plotly.graph_objects as go

from zerolock_core.rundir.metrics import Metrics, shown_accuracy
from zerolock_core.telemetry.activity import StageStats
from zerolock_core.viz.palette import NEUTRAL, stage_colour, stage_dash

from .chance import chance_level
from .layout import fast_figure, subplot_title
from .timeline import lane_axis


def chunk_index(name: str) -> int | None:
    """"chunk3" -> 3; a curve of the whole model (backprop's "global") -> None."""
    return int(name.removeprefix("chunk")) if name.startswith("chunk") and name[5:].isdigit() else None


LOSS_DOMAIN, ACCURACY_DOMAIN = (0.0, 0.5456), (0.6656, 1.0)  # make_subplots' 0.62 / 0.38 split, 0.12 apart
MARKERS_MAX_POINTS = 60  # a curve with more points is a plain line: each marker is an SVG path the
# browser redraws with every update (600 steps x 2 chunks: 45 ms a draw with markers, 17 ms without)


def training_figure(metrics: Metrics | None, *, title: str = "",
                    live_curves: list[dict[str, Any]] | None = None) -> go.Figure:
    """Left: every chunk's local training loss per step (BP: the one global loss), from metrics.json
    once the run ended, else from `live_curves` (app/figures/live_loss.py) while it runs.
    Right: eval accuracy of every chunk's own readout (the last chunk is the model's answer).
    Built from plain dicts (fast_figure): the Watch tab redraws it every few seconds while a run goes,
    and plotly's validated make_subplots cost ~0.18 s of the app's CPU per draw."""
    curves = (metrics.curves if metrics else []) or live_curves or []
    per_chunk = ((metrics.eval if metrics else None) or {}).get("per_chunk") or []
    if not curves and not per_chunk:
        return placeholder_figure("The loss curves start with the first local loss (L) or last-stage<br>"
                                  "backward (B); the eval accuracy arrives when the run ends.", title=title,
                                  height=340)
    chunks = 1 + max([chunk_index(c["chunk"]) or 0 for c in curves] + [p["chunk"] for p in per_chunk] + [0])
    data: list[dict[str, Any]] = []
    for c in curves:  # chunk k is stage k's part of the model: its slate shade and dash
        k = chunk_index(c["chunk"])
        data.append(dict(type="scatter", x=list(c["step"]), y=list(c["loss"]),
                         mode="lines+markers" if len(c["step"]) <= MARKERS_MAX_POINTS else "lines",
                         marker=dict(size=4), xaxis="x", yaxis="y",
                         name="loss of the whole model (backprop)" if k is None else f"chunk {k} local loss",
                         line=dict(color=NEUTRAL["ink"] if k is None else stage_colour(k, chunks), width=2,
                                   dash="solid" if k is None else stage_dash(k))))
    annotations = [subplot_title("training loss", x0=LOSS_DOMAIN[0], x1=LOSS_DOMAIN[1]),
                   subplot_title("eval accuracy per chunk", x0=ACCURACY_DOMAIN[0], x1=ACCURACY_DOMAIN[1])]
    level = chance_level(metrics)
    if level is not None:  # what answering without looking gets: the bars must clear it
        data.append(dict(type="scatter", x=[0, 1], y=[level[0]] * 2, xaxis="x3", yaxis="y2", mode="lines",
                         line=dict(color=NEUTRAL["chance"], width=1.5, dash="dash"), name=level[1],
                         hovertemplate=f"{level[1]}: {level[0]:.2f}<extra></extra>"))
    if per_chunk:
        ks = [p["chunk"] for p in per_chunk]
        what, _ = shown_accuracy(per_chunk[0])
        ys = [shown_accuracy(p)[1] or 0.0 for p in per_chunk]
        data.append(dict(type="bar", x=[f"chunk {k}" for k in ks], y=ys,
                         marker=dict(color=[stage_colour(k, chunks) for k in ks]), name=what,
                         showlegend=False, text=[f"{y:.2f}" for y in ys],
                         textposition="auto", xaxis="x2", yaxis="y2",
                         hovertemplate=f"%{{x}}: {what} %{{y:.3f}}<extra></extra>"))
    else:
        waiting = metrics is None and live_curves
        annotations.append(dict(text="eval accuracy: when the run ends" if waiting else
                                "no eval (the run stopped early or failed)", showarrow=False,
                                xref="paper", yref="paper", x=0.88, y=0.5))
    last = max((c["step"][-1] for c in curves if c["step"]), default=1)
    layout = dict(
        # whole steps, and at most 6 ticks: a half-width panel at 820 px must not run them together
        xaxis=dict(domain=list(LOSS_DOMAIN), anchor="y", title=dict(text="optimizer step"),
                   dtick=_nice_step(last / 5)),
        yaxis=dict(anchor="x", title=dict(text="loss (nats)")),
        xaxis2=dict(domain=list(ACCURACY_DOMAIN), anchor="y2"),
        # the chance line spans the accuracy panel whatever its bars (an overlay axis from 0 to 1)
        xaxis3=dict(domain=list(ACCURACY_DOMAIN), overlaying="x2", range=[0, 1], visible=False),
        yaxis2=dict(anchor="x2", title=dict(text="label accuracy"), range=[0, 1]),
        annotations=annotations)
    return fast_figure(data, layout, title=title, height=340, subplot_titles=True, left=60)


def _nice_step(raw: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... steps that is at least `raw`."""
    step = 1
    while True:
        for m in (1, 2, 5):
            if step * m >= raw:
                return step * m
        step *= 10


def placeholder_figure(message: str, *, title: str = "", height: int = 300) -> go.Figure:
    """A figure with a message and no axes (for data that does not exist yet)."""
    layout = dict(xaxis=dict(visible=False), yaxis=dict(visible=False),
                  annotations=[dict(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5,
                                    font=dict(size=13, color=NEUTRAL["muted"]))])
    return fast_figure([], layout, title=title, height=height, legend=False)


def activity_figure(stats: Sequence[StageStats], *, bubble: float | None = None, title: str = "") -> go.Figure:
    """Per stage lane (stage 0 on top): the share of its time spent computing vs idle/waiting."""
    stages = len(stats)
    active = [round(100 * s.active_fraction) for s in stats]  # whole percent: what the labels say
    ys = list(range(stages))
    head = title or "active vs idle per stage"
    if bubble is not None:
        head += f" · bubble {100 * bubble:.0f}%"
    # busy time in each stage's slate shade (lane = stage), idle in the structural grey: never a kind colour
    data = [dict(type="bar", x=active, y=ys, orientation="h", name="computing",
                 marker=dict(color=[stage_colour(s, stages) for s in ys]),
                 text=[f"{a}%" for a in active], textposition="inside", customdata=[f"stage {s}" for s in ys],
                 hovertemplate="%{customdata}: computing %{x}%<extra></extra>"),
            dict(type="bar", x=[100 - a for a in active], y=ys, orientation="h", name="idle / waiting",
                 marker=dict(color=NEUTRAL["idle"]), customdata=[f"stage {s}" for s in ys],
                 hovertemplate="%{customdata}: idle %{x}%<extra></extra>")]
    layout = dict(barmode="stack", yaxis=lane_axis(stages),
                  xaxis=dict(title=dict(text="% of the stage's time"), range=[0, 100]))
    return fast_figure(data, layout, title=head, height=max(240, 150 + 36 * stages))
