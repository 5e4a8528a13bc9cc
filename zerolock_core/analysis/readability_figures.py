"""The readability figures (label accuracy and answer NLL after every layer), drawn the same for
`zerolock bench readability`, the dashboard's Readability tab and notebook 7.

plotly is imported on first use: the engine does not need it, only whoever draws (the `app` and
`notebooks` extras install it). Colours from the one palette: each fine-tune in its method's colour,
the pretrained model, the chunk boundaries and the majority-class line in greys.
"""
from __future__ import annotations

from typing import Any

from ..viz.palette import NEUTRAL, method_colour
from .readability import measured_curves

CURVE_DASHES = {"lens": "solid", "tuned": "dot", "top": "dashdot"}


def curve_name(curve: str, condition: dict[str, Any]) -> str:
    """How a curve is named in a legend or a table."""
    if curve == "top":
        return f"top:{condition['top_layers']} (the model's top {condition['top_layers']} layers)"
    return {"lens": "frozen head", "tuned": "fitted translator"}[curve]
METRICS = (("label_accuracy", "label accuracy"), ("nll", "answer NLL (nats / token)"))


def condition_colour(name: str) -> str:
    """The pretrained model (no method) in grey, a fine-tune in its method's colour."""
    return NEUTRAL["base"] if name == "pretrained" else method_colour(name)


def readability_figures(summary: dict[str, Any], *, model: str, dataset: str, stages: int) -> dict[str, Any]:
    """`readability_summary`'s curves vs depth: {"readability_label_accuracy", "readability_nll"}."""
    import plotly.graph_objects as go

    figs = {}
    for metric, title in METRICS:
        fig = go.Figure([
            go.Scatter(name=f"{name} · {curve_name(curve, summary['conditions'][name])}", x=[r["layer"] for r in scores],
                       y=[r[metric] for r in scores], mode="lines+markers",
                       line={"color": condition_colour(name), "dash": CURVE_DASHES[curve]})
            for name, curve, scores in measured_curves(summary)
        ]).update_layout(
            title=f"Readability of {model} on {dataset}: {title} after each layer (dashed: chunk boundaries at "
                  f"K={stages})",
            xaxis_title="layer", yaxis_title=title, template="plotly_white")
        for cut in summary["chunk_boundaries"]:
            fig.add_vline(x=cut + 0.5, line=dict(color=NEUTRAL["boundary"], dash="dash"))
        if metric == "label_accuracy":  # a rate: always 0-1, so a curve at chance looks like one
            fig.update_yaxes(range=[0, 1], autorange=False)
            fig.add_hline(y=summary["chance"], line=dict(color=NEUTRAL["chance"], dash="dot"),
                          annotation_text="majority class", annotation_position="bottom right")
        figs[f"readability_{metric}"] = fig
    return figs
