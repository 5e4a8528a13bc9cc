"""Side-by-side figures of several runs (Compare tab, Explain tab, notebooks).

Every run is drawn from its own start (time 0 = its first action), on one common time axis, so
the lengths of the runs and the places where stages wait can be compared by eye."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .layout import amount, frame
from .memory import MEASURES, MemoryGrid, add_memory_traces, memory_grid
from .palette import method_colour, method_label
from .run_figures import placeholder_figure
from .timebase import first_steps_ms, time_origin
from .timeline import LANE_HEIGHT_PX, WEBGL_THRESHOLD, add_timeline_traces, style_lanes


@dataclass(kw_only=True)
class Series:
    """One run to compare: its label, events, number of stages, and (optionally) metrics.json."""
    label: str
    events: list[dict[str, Any]]
    stages: int
    method: str = ""
    metrics: dict[str, Any] | None = field(default=None)

    @property
    def short(self) -> str:
        return method_label(self.method) if self.method else self.label


def _split(series: Sequence[Series]) -> tuple[list[Series], str]:
    """The runs with per-stage telemetry, and a footnote naming those without (reference runs)."""
    drawn = [s for s in series if s.events]
    others = [s.label for s in series if not s.events]
    note = f"Not shown: {', '.join(others)} (single process, no per-stage telemetry)." if others else ""
    return drawn, note


def _footnote(fig: go.Figure, text: str) -> None:
    if text:
        fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0, y=1,
                           xanchor="left", yanchor="bottom", yshift=22, font=dict(size=11, color="#666666"))


def focus_range(series: Sequence[Series], steps: int | None) -> list[float] | None:
    """The x range showing every run's first `steps` optimizer steps (None: show everything)."""
    if not steps:
        return None
    ends = [first_steps_ms(s.events, steps) for s in series if s.events]
    total = [first_steps_ms(s.events, steps + 1) for s in series if s.events]
    if not ends or any(e is None for e in ends) or all(t is None for t in total):
        return None  # the runs are too short for a zoom to help
    return [0.0, 1.02 * max(ends)]


def compare_timeline_figure(series: Sequence[Series], *, title: str = "", initial_steps: int | None = 3,
                            webgl_threshold: int = WEBGL_THRESHOLD) -> go.Figure:
    """One row of stage lanes per run, all on one time axis (ms since each run's first action).
    Long runs open zoomed on their first `initial_steps` optimizer steps (autoscale shows all)."""
    if not series:
        raise ValueError("compare_timeline_figure needs at least one run")
    series, note = _split(series)
    if not series:
        return placeholder_figure(note, title=title, height=200)
    total = sum(len(s.events) for s in series)
    heights = [max(1, s.stages) for s in series]
    fig = make_subplots(rows=len(series), cols=1, shared_xaxes=True, vertical_spacing=0.28 / len(series),
                        row_heights=heights, subplot_titles=[s.label for s in series])
    seen: set[str] = set()
    for i, s in enumerate(series, start=1):
        add_timeline_traces(fig, s.events, stages=s.stages, origin_ns=time_origin(s.events),
                            webgl=total > webgl_threshold, row=i, col=1, legend_seen=seen)
        style_lanes(fig, stages=s.stages, row=i, col=1)
    fig.update_xaxes(title_text="time since the run's first action (ms)", row=len(series), col=1)
    fig.update_xaxes(range=focus_range(series, initial_steps))
    frame(fig, title=title, height=110 + sum(LANE_HEIGHT_PX * h + 60 for h in heights), subplot_titles=True,
          uirevision="compare-timeline")
    fig.update_layout(barmode="overlay", bargap=0)
    _footnote(fig, note)
    return fig


def _peaks(s: Series, grid: MemoryGrid, measure: str) -> list[float]:
    """Measured peak per stage from metrics.json when it is there (it also sees transients inside an
    action), else the peak of the after-action samples."""
    per_stage = (s.metrics or {}).get("per_stage") or []
    if measure == "act_bytes" and len(per_stage) == s.stages:
        return [p["peak_activation_bytes"] / 2**20 for p in per_stage]
    if measure == "inflight" and len(per_stage) == s.stages:
        return [float(p["peak_inflight_microbatches"]) for p in per_stage]
    return grid.peaks


def compare_memory_figure(series: Sequence[Series], *, measure: str = "act_bytes", title: str = "",
                          initial_steps: int | None = 3) -> go.Figure:
    """Left: per run, every stage's held activations over time (shared time and value axes), opened
    on the first `initial_steps` steps like the timelines. Right: the peak per stage, one bar per run,
    so the methods' memory can be read side by side."""
    if not series:
        raise ValueError("compare_memory_figure needs at least one run")
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MEASURES)} (got {measure!r})")
    what, unit, _ = MEASURES[measure]
    series, note = _split(series)
    if not series:
        return placeholder_figure(note, title=title, height=200)
    n = len(series)
    specs = [[{}, {"rowspan": n} if i == 0 else None] for i in range(n)]
    fig = make_subplots(rows=n, cols=2, specs=specs, column_widths=[0.66, 0.34], shared_xaxes=True,
                        shared_yaxes=False, horizontal_spacing=0.1, vertical_spacing=0.22 / n,
                        subplot_titles=_titles(series, what))
    stages = max(s.stages for s in series)
    grids = [memory_grid(s.events, stages=s.stages, measure=measure) for s in series]
    top = 1.05 * max((max(v, default=0) for g in grids for v in g.values), default=0) or 1.0
    for i, (s, grid) in enumerate(zip(series, grids), start=1):
        add_memory_traces(fig, grid, row=i, col=1, showlegend=i == 1)
        fig.update_yaxes(title_text=unit, range=[0, top], row=i, col=1)  # one scale for every run
        peaks = _peaks(s, grid, measure)
        if any(peaks):
            fig.add_trace(go.Bar(
                x=peaks, y=list(range(s.stages)), orientation="h", name=s.label, showlegend=False,
                marker=dict(color=method_colour(s.method)), offsetgroup=str(i),
                text=[f"{s.short}: {amount(p, unit)}" for p in peaks], textposition="auto",
                insidetextanchor="start",
                hovertemplate=f"{s.label}<br>stage %{{y}} peak %{{x:.3g}} {unit}<extra></extra>"), row=1, col=2)
    fig.update_yaxes(tickmode="array", tickvals=list(range(stages)),
                     ticktext=[f"stage {k}" for k in range(stages)], range=[stages - 0.5, -0.5], row=1, col=2)
    fig.update_xaxes(title_text=f"peak ({unit})", rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title_text="time since the run's first action (ms)", row=n, col=1)
    focus = focus_range(series, initial_steps)
    for i in range(1, n + 1):
        fig.update_xaxes(range=focus, row=i, col=1)
    frame(fig, title=title, height=150 + 180 * n, subplot_titles=True, uirevision="compare-memory")
    fig.update_layout(barmode="group")
    _footnote(fig, note)
    return fig


def _titles(series: Sequence[Series], what: str) -> list[str]:
    """Subplot titles in make_subplots order: row by row, left then right (right only on row 1)."""
    out = []
    for i, s in enumerate(series):
        out.append(f"{s.label}: {what}")
        if i == 0:
            out.append(f"peak {what} per stage")
    return out


def compare_summary_figure(series: Sequence[Series], *, title: str = "") -> go.Figure:
    """Throughput, eval label accuracy and bubble per run (one bar each, coloured by method)."""
    if not series:
        raise ValueError("compare_summary_figure needs at least one run")
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.09,
                        subplot_titles=("throughput (samples/s)", "eval label accuracy", "bubble (% idle)"))
    labels = [s.short for s in series]
    colours = [method_colour(s.method) for s in series]

    def metric(s: Series, getter) -> float | None:
        try:
            return getter(s.metrics) if s.metrics else None
        except (KeyError, TypeError):
            return None

    columns = [
        [metric(s, lambda m: m["throughput_samples_per_s"] if "throughput_samples_per_s" in m else m["samples_per_s"])
         for s in series],
        [metric(s, lambda m: m["eval"]["label_accuracy"]) for s in series],
        [metric(s, lambda m: 100 * m["bubble_fraction"]) for s in series],
    ]
    fmt = ("{:.1f}", "{:.3f}", "{:.0f}%")
    for col, (values, f) in enumerate(zip(columns, fmt), start=1):
        fig.add_trace(go.Bar(x=labels, y=[v if v is not None else 0 for v in values], marker=dict(color=colours),
                             text=[f.format(v) if v is not None else "n/a" for v in values], textposition="auto",
                             showlegend=False, hovertemplate="%{x}: %{y:.3g}<extra></extra>"), row=1, col=col)
    fig.update_yaxes(range=[0, 1], row=1, col=2)
    fig.update_yaxes(range=[0, 100], row=1, col=3)
    frame(fig, title=title, height=330, legend=False, subplot_titles=True, left=50)
    return fig
