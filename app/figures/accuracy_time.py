"""Accuracy against seconds for the runs Compare compares: which run reaches an accuracy first.

Each run's evals (metrics' `eval_history`, then its final eval) at the seconds into its training when the
evaluated step had finished: read from the run's timeline (the last stage to finish that optimizer step)
when its events have the step, else the step times the run's mean step time (its training time / the
steps it trained this session; a reference run's in-between evals are inside that time). The figure says
which, run by run. One line per run in its method's colour, on an accuracy axis from 0 to 1."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import plotly.graph_objects as go

from zerolock_core.rundir.metrics import shown_accuracy
from zerolock_core.viz.palette import NEUTRAL, dash, marker, method_colour

from .chance import chance_level
from .compare import Series, unique_names
from .layout import frame
from .timebase import first_steps_s, training_origin
from .training import placeholder_figure

FROM_TIMELINE = "timeline"  # seconds read from the run's STEP events
FROM_MEAN_STEP = "steps × mean step time"  # seconds estimated from its training time


@dataclass(kw_only=True, frozen=True)
class AccuracyTimes:
    """One run's evals: the step each scored, its seconds into training, its accuracy, and where the
    seconds came from (FROM_TIMELINE or FROM_MEAN_STEP)."""
    steps: tuple[int, ...]
    seconds: tuple[float, ...]
    accuracy: tuple[float, ...]
    source: str


def accuracy_times(s: Series) -> AccuracyTimes | None:
    """`s`'s evals against seconds (None: no eval with an accuracy, or no way to time it)."""
    m = s.metrics
    if m is None:
        return None
    evals = [(int(e["step"]), shown_accuracy(e)[1]) for e in m.eval_history if e.get("step") is not None]
    if m.eval is not None and all(step != m.steps_done for step, _ in evals):
        evals.append((m.steps_done, m.headline_accuracy))
    evals = sorted((step, a) for step, a in evals if a is not None)
    if not evals:
        return None
    origin = training_origin(s.events)
    measured = [first_steps_s(s.events, step, origin_ns=origin) if s.events else None for step, _ in evals]
    if all(t is not None for t in measured):
        seconds, source = measured, FROM_TIMELINE
    else:  # one source per run: a line never mixes measured and estimated points
        trained = m.steps_done - (m.resumed_from_step or 0)
        if trained <= 0 or m.wall_s <= 0:
            return None
        seconds, source = [step * m.wall_s / trained for step, _ in evals], FROM_MEAN_STEP
    return AccuracyTimes(steps=tuple(step for step, _ in evals), seconds=tuple(float(t) for t in seconds),
                         accuracy=tuple(float(a) for _, a in evals), source=source)


def accuracy_time_figure(series: Sequence[Series], *, title: str = "") -> go.Figure:
    """One line per run: its accuracy (y, 0-1) at each eval against seconds into its training (x); runs of
    one method differ by dash and marker; the chance line where known."""
    if not series:
        raise ValueError("accuracy_time_figure needs at least one run")
    fig = go.Figure()
    single = False
    for i, (s, name) in enumerate(zip(series, unique_names(series))):
        at = accuracy_times(s)
        if at is None:
            continue
        single = single or len(at.steps) == 1
        colour = method_colour(s.method)
        fig.add_trace(go.Scatter(
            x=list(at.seconds), y=list(at.accuracy), mode="lines+markers", name=f"{name} (x: {at.source})",
            line=dict(color=colour, width=2.5, dash=dash(i)), marker=dict(color=colour, size=9, symbol=marker(i)),
            customdata=list(at.steps),
            hovertemplate=f"{name}<br>step %{{customdata}} done at %{{x:.1f}} s ({at.source}): "
                          "accuracy %{y:.3f}<extra></extra>"))
    if not fig.data:
        return placeholder_figure("No evals yet: each run's accuracy comes with its record (metrics.json).",
                                  title=title, height=200)
    level = next((c for c in (chance_level(s.metrics, s.run_config) for s in series) if c is not None), None)
    if level is not None:
        fig.add_hline(y=level[0], line_color=NEUTRAL["chance"], line_width=1.5, line_dash="dash", name="chance",
                      annotation_text=level[1], annotation_position="bottom right",
                      annotation_font=dict(size=11, color=NEUTRAL["muted"]))
    fig.update_yaxes(title_text="eval accuracy", range=[0, 1])
    fig.update_xaxes(title_text="seconds into training when the evaluated step had finished", rangemode="tozero",
                     ticksuffix=" s")
    frame(fig, title=title, height=360, left=60)
    if single:
        fig.add_annotation(text="One point: a run evaluated only at its end (--eval-every N scores every "
                                "N-th step and draws a curve).", showarrow=False,
                           xref="paper", yref="paper", x=1, y=1, xanchor="right", yanchor="top",
                           font=dict(size=11, color=NEUTRAL["muted"]))
    return fig
