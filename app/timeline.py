"""Per-stage timeline lanes (Gantt): one lane per stage, stage 0 on top, a bar per action.

Bars are `go.Bar(base=start, x=duration, orientation="h")`, one trace per action kind. Past
`WEBGL_THRESHOLD` bars the SVG bars get slow in the browser, so each kind becomes one `Scattergl`
trace of thick line segments instead (same colours, same lanes).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go

from .layout import fast_figure
from .palette import COMPUTE_KINDS, kind_colour, kind_label, kind_sort_key
from .timebase import Events, recent, time_origin, to_ms

WEBGL_THRESHOLD = 3000  # bars per figure
OUTLINE_MAX_BARS = 200  # past this, bars lose their white edges (stroking every bar costs the browser)
LANE_HEIGHT_PX = 46
COMPUTE_WIDTH, COMM_WIDTH = 0.8, 0.45  # bar thickness in lanes: waits and sends drawn thinner


@dataclass(kw_only=True)
class KindLane:
    """All bars of one action kind: parallel lists (one entry per bar)."""
    kind: str
    stage: list[int] = field(default_factory=list)
    start_ms: list[float] = field(default_factory=list)
    dur_ms: list[float] = field(default_factory=list)
    mb: list[int | None] = field(default_factory=list)


def lane_bars(events: Events, *, stages: int, origin_ns: int) -> list[KindLane]:
    """Group events into bars per kind, in legend order; events of stages >= `stages` are errors."""
    lanes: dict[str, KindLane] = {}
    for e in events:
        s = e["stage"]
        if not 0 <= s < stages:
            raise ValueError(f"event of stage {s} in a {stages}-stage timeline: {e}")
        lane = lanes.setdefault(e["kind"], KindLane(kind=e["kind"]))
        lane.stage.append(s)
        lane.start_ms.append(to_ms(e["t0"], origin_ns))
        lane.dur_ms.append(max(0.0, (e["t1"] - e["t0"]) / 1e6))
        lane.mb.append(e.get("mb"))
    return [lanes[k] for k in sorted(lanes, key=kind_sort_key)]


def _bar_trace(lane: KindLane, *, showlegend: bool, outline: bool) -> dict[str, Any]:
    start = np.round(np.asarray(lane.start_ms), 3)  # µs precision keeps the JSON small
    dur = np.round(np.asarray(lane.dur_ms), 3)
    has_mb = any(mb is not None for mb in lane.mb)
    custom = np.column_stack([[-1 if mb is None else mb for mb in lane.mb], np.round(start + dur, 3)])
    what = f"{lane.kind}%{{customdata[0]}}" if has_mb else lane.kind
    return dict(
        type="bar", base=start, x=dur, y=np.asarray(lane.stage), orientation="h",
        width=COMPUTE_WIDTH if lane.kind in COMPUTE_KINDS else COMM_WIDTH,
        name=kind_label(lane.kind), legendgroup=lane.kind, showlegend=showlegend,
        # a thin white edge keeps back-to-back bars of one kind apart (F0 F1 F2 in GPipe)
        marker=dict(color=kind_colour(lane.kind), line=dict(color="white", width=1 if outline else 0)),
        customdata=custom,
        hovertemplate=(f"stage %{{y}} · {what}<br>"
                       "%{base:.2f} → %{customdata[1]:.2f} ms (%{x:.2f} ms)<extra></extra>"))


def _segment_trace(lane: KindLane, *, showlegend: bool) -> dict[str, Any]:
    xs: list[float | None] = []
    ys: list[int | None] = []
    for s, t, d in zip(lane.stage, lane.start_ms, lane.dur_ms):
        xs += [round(t, 3), round(t + d, 3), None]
        ys += [s, s, None]
    thick = max(2.0, LANE_HEIGHT_PX * (0.6 if lane.kind in COMPUTE_KINDS else 0.3))
    return dict(type="scattergl", x=xs, y=ys, mode="lines", line=dict(color=kind_colour(lane.kind), width=thick),
                name=kind_label(lane.kind), legendgroup=lane.kind, showlegend=showlegend, hoverinfo="skip")


def timeline_traces(events: Events, *, stages: int, origin_ns: int, webgl: bool, outline: bool | None = None,
                    legend_seen: set[str] | None = None) -> list[dict[str, Any]]:
    """One trace (a dict) per action kind. `outline`: white bar edges (default: up to
    OUTLINE_MAX_BARS bars). `legend_seen` makes a kind appear in the legend once across subplots."""
    seen = legend_seen if legend_seen is not None else set()
    outline = len(events) <= OUTLINE_MAX_BARS if outline is None else outline
    traces = []
    for lane in lane_bars(events, stages=stages, origin_ns=origin_ns):
        show = lane.kind not in seen
        seen.add(lane.kind)
        traces.append(_segment_trace(lane, showlegend=show) if webgl
                      else _bar_trace(lane, showlegend=show, outline=outline))
    return traces


def add_timeline_traces(fig: go.Figure, events: Events, *, stages: int, origin_ns: int, webgl: bool,
                        row: int | None = None, col: int | None = None,
                        legend_seen: set[str] | None = None) -> None:
    """Add the timeline traces to a subplot of `fig` (Compare and Explain stack several runs; drawn
    once and opened zoomed in, so their bars keep their edges)."""
    for trace in timeline_traces(events, stages=stages, origin_ns=origin_ns, webgl=webgl, outline=True,
                                 legend_seen=legend_seen):
        fig.add_trace(trace, row=row, col=col)


def lane_axis(stages: int) -> dict[str, Any]:
    """Integer lanes labelled `stage s`, stage 0 on top."""
    return dict(tickmode="array", tickvals=list(range(stages)), ticktext=[f"stage {s}" for s in range(stages)],
                range=[stages - 0.5, -0.5], showgrid=False, zeroline=False, fixedrange=True)


def style_lanes(fig: go.Figure, *, stages: int, row: int | None = None, col: int | None = None) -> None:
    fig.update_yaxes(**lane_axis(stages), row=row, col=col)


def timeline_figure(events: list[dict[str, Any]], *, stages: int, title: str = "",
                    window_s: float | None = None, origin_ns: int | None = None,
                    webgl_threshold: int = WEBGL_THRESHOLD, uirevision: str = "timeline") -> go.Figure:
    """One lane per stage (stage 0 on top), one bar per action, coloured by kind (KIND_COLOURS).

    window_s: draw only the events that end in the last `window_s` seconds (None = all).
    origin_ns: time zero of the x axis (default: the earliest event given, before windowing).
    uirevision: keep the user's zoom across redraws with the same value.
    """
    if stages < 1:
        raise ValueError(f"stages must be at least 1 (got {stages})")
    origin = time_origin(events) if origin_ns is None else origin_ns
    shown = recent(events, window_s)
    traces = timeline_traces(shown, stages=stages, origin_ns=origin, webgl=len(shown) > webgl_threshold)
    layout: dict[str, Any] = dict(yaxis=lane_axis(stages), xaxis=dict(title=dict(text="time since start (ms)"),
                                                                      zeroline=False),
                                  barmode="overlay", bargap=0)
    if not shown:
        layout["annotations"] = [dict(text="no actions yet", showarrow=False, xref="paper", yref="paper",
                                      x=0.5, y=0.5)]
    return fast_figure(traces, layout, title=title, height=max(230, 140 + LANE_HEIGHT_PX * stages),
                       uirevision=uirevision)
