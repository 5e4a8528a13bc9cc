"""Per-stage live activation memory on one shared time grid, and each stage's peak.

Each event carries what its stage holds *after* the action (`act_bytes`, measured by the engine,
or `inflight`, the micro-batches whose activations are held). Every stage's step function is
sampled on the union of all event end times, so the curves (and a stacked total) line up.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go

from .layout import amount, fast_figure, subplot_title
from .palette import stage_colour
from .timebase import Events, time_origin, to_ms
from .timeline import lane_axis

MEASURES = {"act_bytes": ("activation memory", "MiB", 1 / 2**20),
            "inflight": ("micro-batches of activations", "micro-batches", 1.0)}
MAX_GRID_POINTS = 4000


@dataclass(kw_only=True)
class MemoryGrid:
    t_ms: list[float]  # the shared grid
    values: list[list[float]]  # values[stage][i] at t_ms[i], in the measure's unit
    peaks: list[float]  # per stage, over every event given (not only the window)
    unit: str


def _check_measure(measure: str) -> tuple[str, str, float]:
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MEASURES)} (got {measure!r})")
    return MEASURES[measure]


def memory_grid(events: Events, *, stages: int, measure: str = "act_bytes", origin_ns: int | None = None,
                window_s: float | None = None, max_points: int = MAX_GRID_POINTS) -> MemoryGrid:
    """Sample every stage's held-activation step function on one grid of event end times.

    With `window_s`, the grid covers only the last `window_s` seconds, starting from the values
    each stage held when the window opened. Past `max_points` grid times, consecutive times are
    merged keeping each stage's maximum, so peaks survive the thinning."""
    _, unit, scale = _check_measure(measure)
    origin = time_origin(events) if origin_ns is None else origin_ns
    ordered = sorted(events, key=lambda e: e["t1"])
    end = ordered[-1]["t1"] if ordered else origin
    start = origin if window_s is None else max(origin, end - int(window_s * 1e9))
    current = [0.0] * stages
    peaks = [0.0] * stages
    t_ms: list[float] = [to_ms(start, origin)]
    values: list[list[float]] = [[0.0] for _ in range(stages)]
    for e in ordered:
        s = e["stage"]
        if not 0 <= s < stages:
            raise ValueError(f"event of stage {s} in a {stages}-stage memory chart: {e}")
        current[s] = e.get(measure, 0) * scale
        peaks[s] = max(peaks[s], current[s])
        if e["t1"] <= start:  # before the window: only sets the starting values
            for k in range(stages):
                values[k][0] = current[k]
            continue
        t = to_ms(e["t1"], origin)
        if t == t_ms[-1]:
            for k in range(stages):
                values[k][-1] = current[k]
        else:
            t_ms.append(t)
            for k in range(stages):
                values[k].append(current[k])
    if len(t_ms) > max_points:
        t_ms, values = _thin(t_ms, values, max_points)
    return MemoryGrid(t_ms=t_ms, values=values, peaks=peaks, unit=unit)


def _thin(t_ms: list[float], values: list[list[float]], max_points: int) -> tuple[list[float], list[list[float]]]:
    step = -(-len(t_ms) // max_points)
    t_out = t_ms[::step]
    v_out = [[max(v[i:i + step]) for i in range(0, len(v), step)] for v in values]
    return t_out, v_out


def memory_traces(grid: MemoryGrid, *, showlegend: bool = True, axes: tuple[str, str] = ("x", "y"),
                  label_prefix: str = "") -> list[dict[str, Any]]:
    t = np.round(np.asarray(grid.t_ms), 3)
    return [dict(type="scatter", x=t, y=np.round(np.asarray(series), 4), mode="lines", xaxis=axes[0], yaxis=axes[1],
                 line=dict(color=stage_colour(s), width=2, shape="hv"), name=f"{label_prefix}stage {s}",
                 legendgroup=f"stage{s}", showlegend=showlegend,
                 hovertemplate=f"stage {s}: %{{y:.3g}} {grid.unit} at %{{x:.1f}} ms<extra></extra>")
            for s, series in enumerate(grid.values)]


def peak_bars(grid: MemoryGrid, *, axes: tuple[str, str] = ("x", "y")) -> dict[str, Any]:
    """Horizontal bars, one per stage, stage 0 on top (like the timeline lanes)."""
    stages = len(grid.peaks)
    return dict(type="bar", x=grid.peaks, y=list(range(stages)), orientation="h", showlegend=False,
                xaxis=axes[0], yaxis=axes[1], marker=dict(color=[stage_colour(s) for s in range(stages)]),
                text=[amount(p, grid.unit) for p in grid.peaks], textposition="auto",
                hovertemplate=f"stage %{{y}} peak: %{{x:.3g}} {grid.unit}<extra></extra>")


def add_memory_traces(fig: go.Figure, grid: MemoryGrid, *, row: int, col: int, showlegend: bool = True) -> None:
    for trace in memory_traces(grid, showlegend=showlegend):
        del trace["xaxis"], trace["yaxis"]  # make_subplots places them
        fig.add_trace(trace, row=row, col=col)


LEFT, RIGHT = (0.0, 0.70), (0.80, 1.0)  # x domains: curves over time | peak per stage


def memory_figure(events: list[dict[str, Any]], *, stages: int, title: str = "", measure: str = "act_bytes",
                  window_s: float | None = None, origin_ns: int | None = None,
                  peak_bytes: Sequence[int] | None = None, uirevision: str = "memory") -> go.Figure:
    """Left: every stage's held activations over time (one shared grid). Right: each stage's peak.

    measure: "act_bytes" (measured bytes, shown in MiB) or "inflight" (micro-batches held).
    peak_bytes: per-stage peaks from metrics.json (`per_stage[s].peak_activation_bytes`, which also
    sees transients inside an action); default: the highest after-action sample."""
    if stages < 1:
        raise ValueError(f"stages must be at least 1 (got {stages})")
    what, unit, _ = _check_measure(measure)
    grid = memory_grid(events, stages=stages, measure=measure, origin_ns=origin_ns, window_s=window_s)
    peak_title = "peak per stage"
    if peak_bytes is not None:
        if measure != "act_bytes" or len(peak_bytes) != stages:
            raise ValueError(f"peak_bytes needs measure='act_bytes' and one value per stage ({stages})")
        grid.peaks = [b / 2**20 for b in peak_bytes]
        peak_title = "measured peak per stage"
    right_y = lane_axis(stages)
    right_y.update(anchor="x2", fixedrange=False)
    layout = dict(
        xaxis=dict(domain=LEFT, anchor="y", title=dict(text="time since start (ms)")),
        yaxis=dict(anchor="x", title=dict(text=unit), rangemode="tozero"),
        xaxis2=dict(domain=RIGHT, anchor="y2", title=dict(text=unit), rangemode="tozero"),
        yaxis2=right_y,
        annotations=[subplot_title(f"{what} held per stage (after each action)", x0=LEFT[0], x1=LEFT[1]),
                     subplot_title(peak_title, x0=RIGHT[0], x1=RIGHT[1])])
    return fast_figure([*memory_traces(grid), peak_bars(grid, axes=("x2", "y2"))], layout, title=title,
                       height=max(300, 220 + 30 * stages), subplot_titles=True, uirevision=uirevision)
