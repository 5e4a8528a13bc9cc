"""The common frame of every figure: title and legend in the top margin, never over the data."""
from __future__ import annotations

import plotly.graph_objects as go

from zerolock_core.viz.palette import FRAME

TITLE_PX, LEGEND_PX, SUBTITLE_PX = 34, 30, 26
_GRID = FRAME["grid"]
_AXIS = dict(gridcolor=_GRID, linecolor=_GRID, zerolinecolor=_GRID, automargin=True, ticks="")
# The look of plotly's "plotly_white", layout only (its colours: palette.FRAME).
LIGHT = dict(layout=dict(paper_bgcolor="white", plot_bgcolor="white", font=dict(color=FRAME["text"]), xaxis=_AXIS,
                         yaxis=_AXIS, hoverlabel=dict(align="left")))


def frame_layout(*, title: str, height: int, legend: bool = True, subplot_titles: bool = False,
                 uirevision: str | None = None, left: int = 70) -> dict:
    """Title at the very top, a horizontal legend under it, then (optionally) subplot titles."""
    top = 10 + (TITLE_PX if title else 0)
    margin_t = top + (LEGEND_PX if legend else 0) + (SUBTITLE_PX if subplot_titles else 0) + 6
    layout = dict(
        template=LIGHT, height=height, showlegend=legend, margin=dict(l=left, r=20, t=margin_t, b=48),
        legend=dict(orientation="h", xanchor="left", x=0, yref="container", yanchor="top", y=1 - top / height,
                    font=dict(size=11), tracegroupgap=0),
        hoverlabel=dict(namelength=0))
    if title:
        layout["title"] = dict(text=title, x=0.01, xanchor="left", yref="container", y=1 - 8 / height,
                               yanchor="top", font=dict(size=16))
    if uirevision is not None:
        layout["uirevision"] = uirevision
    return layout


def frame(fig: go.Figure, **options) -> go.Figure:
    """`frame_layout` applied to an existing figure (the validated, one-off figures)."""
    fig.update_layout(frame_layout(**options))
    return fig


def fast_figure(data: list[dict], layout: dict, **frame_options) -> go.Figure:
    """A figure from plain dicts, skipping plotly's validation (and its update machinery), which costs
    tens of ms per figure: the Watch view redraws several figures twice a second while a run goes.
    The tests validate these same figures once (go.Figure(fig.to_dict()))."""
    return go.Figure(data=data, layout={**layout, **frame_layout(**frame_options)}, _validate=False)


SUBTITLE_FONT_PX = 13


def subplot_title(text: str, *, x0: float, x1: float, align: str = "center") -> dict:
    """An annotation over a hand-placed subplot (what make_subplots would add, without its cost): centred,
    or flush with its left / right edge, so that the titles of subplots side by side grow away from each
    other on a narrow page (820 px) instead of into each other."""
    x, anchor = {"center": ((x0 + x1) / 2, "center"), "left": (x0, "left"), "right": (x1, "right")}[align]
    return dict(text=text, showarrow=False, xref="paper", yref="paper", x=x, y=1.0, xanchor=anchor,
                yanchor="bottom", font=dict(size=SUBTITLE_FONT_PX))


def amount(value: float, unit: str) -> str:
    """`1 micro-batch`, `4 micro-batches`, `1.93 MiB`."""
    if unit == "micro-batches":
        return f"{value:.3g} micro-batch" if value == 1 else f"{value:.3g} micro-batches"
    return f"{value:.3g} {unit}"
