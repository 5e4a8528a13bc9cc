"""The memory calculator's figure: per method, a stacked bar per stage of what it holds at its peak
(parameters, gradients, optimizer state, activations), on one shared axis so the methods compare by eye.

A method's bars are its colour (palette.py); the parts differ by shade and hatch, activations (what the
schedule decides) in full colour.
"""
from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from zerolock_core.viz.palette import NEUTRAL, method_colour, with_alpha

from ..memory_calculator import CALC_METHODS, PART_WORDS, PARTS, StageBytes
from .layout import frame

# a part's look: (opacity of the method's colour, hatch)
PART_LOOK = {"parameters": (0.3, ""), "gradients": (0.55, "/"), "optimizer": (0.55, "x"), "activations": (1.0, "")}
GIB, MIB = 2**30, 2**20


def byte_unit(most: float) -> tuple[str, int]:
    """GiB from a gibibyte on, else MiB."""
    return ("GiB", GIB) if most >= GIB else ("MiB", MIB)


def _look(colour: str, part: str) -> dict:
    alpha, hatch = PART_LOOK[part]
    return dict(color=with_alpha(colour, alpha), line=dict(color=colour, width=1),
                pattern=dict(shape=hatch, fgcolor=colour, size=6) if hatch else None)


def memory_calculator_figure(plans: Mapping[str, tuple[StageBytes, ...] | str], *, title: str) -> go.Figure:
    """`plans`: method (CALC_METHODS) -> its stages' bytes, or why it has none for this setting."""
    counted = [p for p in plans.values() if not isinstance(p, str)]
    unit, scale = byte_unit(max((s.total for p in counted for s in p), default=0))
    fig = make_subplots(rows=1, cols=len(plans), shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=[CALC_METHODS[m].label for m in plans])
    for col, (method, plan) in enumerate(plans.items(), start=1):
        if isinstance(plan, str):
            fig.add_annotation(text=plan.replace(" (", "<br>("), showarrow=False, row=1, col=col, x=0.5, y=0.5,
                               xref="x domain", yref="y domain", font=dict(color=NEUTRAL["muted"], size=12))
            fig.update_xaxes(visible=False, row=1, col=col)
            continue
        colour = method_colour(CALC_METHODS[method].schedule)
        x = [f"stage {s.stage}" for s in plan]
        for part in PARTS:
            fig.add_trace(go.Bar(
                x=x, y=[getattr(s, part) / scale for s in plan], name=PART_WORDS[part], legendgroup=part,
                showlegend=False, marker=_look(colour, part),
                hovertemplate=f"{CALC_METHODS[method].label} · %{{x}}<br>{PART_WORDS[part]}: %{{y:.3g}} {unit}"
                              "<extra></extra>"), row=1, col=col)
        fig.add_trace(go.Scatter(x=x, y=[s.total / scale for s in plan], mode="text", showlegend=False,
                                 text=[f"{s.total / scale:.3g}" for s in plan], textposition="top center",
                                 textfont=dict(size=10), hoverinfo="skip"), row=1, col=col)
    for part in PARTS:  # legend swatches in a neutral grey: the parts' look, not one method's colour
        fig.add_trace(go.Bar(x=[None], y=[None], name=PART_WORDS[part], legendgroup=part,
                             marker=_look(NEUTRAL["muted"], part)), row=1, col=1)
    fig.update_yaxes(title_text=unit, row=1, col=1, rangemode="tozero")
    fig.update_yaxes(range=[0, 1.15 * max((s.total / scale for p in counted for s in p), default=1)])
    frame(fig, title=title, height=360, subplot_titles=True, uirevision="explain-memory-calculator")
    fig.update_layout(barmode="stack", bargap=0.25)
    return fig
