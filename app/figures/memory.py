"""Per-stage live activation memory: one row per stage (small multiples on one shared time axis and
one value scale, so no stage hides another), and each stage's peak.

Each event carries what its stage holds *after* the action (`act_bytes`, measured by the engine,
or `inflight`, the micro-batches whose activations are held). Each row draws:

* the **per-step peak envelope**: for every optimizer step the stage worked on, the highest value
  it held during that step, as a step line from the step's first action to its last (a restart or
  a rollback that redoes a step draws it again where it happened);
* the **per-micro-batch detail** (the after-action step function, sampled on the union of all
  event end times so that rows line up) when at most `DETAIL_MAX_EVENTS` actions are in view.

The right-hand bars give each stage's peak (metrics.json's measured peak when given). The x axis is
the timeline's: seconds since the run started. `unit="MiB"` or `unit="microbatches"` switches
between measured bytes and micro-batches held.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go

from .layout import amount, fast_figure, subplot_title
from zerolock_core.viz.palette import FAILURE_COLOURS, stage_colour, stage_dash, with_alpha
from zerolock_core.runtime.recovery_phases import absence_end_ns
from zerolock_core.vocabulary import Kind
from .timebase import Events, time_origin, to_ms, to_s
from .step_view import step_of
from .timeline import X_TITLE, lane_axis

MEASURES = {"act_bytes": ("activation memory", "MiB", 1 / 2**20),
            "inflight": ("micro-batches of activations", "micro-batches", 1.0)}
UNITS = {"MiB": "act_bytes", "microbatches": "inflight", "micro-batches": "inflight"}  # unit= -> measure
MAX_GRID_POINTS = 4000
DETAIL_MAX_EVENTS = 600  # per-micro-batch detail up to this many actions in view
DOWN = "DOWN"  # a stage's memory drops to 0 at its failure (a sample added for the detail line only)


@dataclass(kw_only=True)
class MemoryGrid:
    t_ms: list[float]  # the shared grid
    values: list[list[float]]  # values[stage][i] at t_ms[i], in the measure's unit
    peaks: list[float]  # per stage, over every event given (not only the window)
    unit: str


@dataclass(kw_only=True, frozen=True)
class StepPeak:
    """The highest value one stage held during one optimizer step (seconds from the origin)."""
    step: int
    t0_s: float
    t1_s: float
    peak: float


def _check_measure(measure: str) -> tuple[str, str, float]:
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MEASURES)} (got {measure!r})")
    return MEASURES[measure]


def measure_for(unit: str | None, measure: str = "act_bytes") -> str:
    """The event field behind `unit` ("MiB" or "microbatches"); `measure` when unit is None."""
    if unit is None:
        _check_measure(measure)
        return measure
    if unit not in UNITS:
        raise ValueError(f"unit must be one of MiB, microbatches (got {unit!r})")
    return UNITS[unit]


def memory_grid(events: Events, *, stages: int, measure: str = "act_bytes", origin_ns: int | None = None,
                window_s: float | None = None, max_points: int = MAX_GRID_POINTS,
                since_ns: int | None = None, until_ns: int | None = None) -> MemoryGrid:
    """Sample every stage's held-activation step function on one grid of event end times.

    With `window_s`, the grid covers only the last `window_s` seconds (with `since_ns` / `until_ns`,
    that slice of the clock), starting from the values each stage held when it opened. Past
    `max_points` grid times, consecutive times are merged keeping each stage's maximum, so peaks
    survive the thinning."""
    _, unit, scale = _check_measure(measure)
    origin = time_origin(events) if origin_ns is None else origin_ns
    ordered = sorted(events, key=lambda e: e["t1"])
    end = ordered[-1]["t1"] if ordered else origin
    start = origin if window_s is None else max(origin, end - int(window_s * 1e9))
    if since_ns is not None:
        start = max(start, since_ns)
    current = [0.0] * stages
    peaks = [0.0] * stages
    t_ms: list[float] = [to_ms(start, origin)]
    values: list[list[float]] = [[0.0] for _ in range(stages)]
    for e in ordered:
        s = e["stage"]
        if not 0 <= s < stages:
            raise ValueError(f"event of stage {s} in a {stages}-stage memory chart: {e}")
        current[s] = (e.get(measure) or 0) * scale
        peaks[s] = max(peaks[s], current[s])
        if e["t1"] <= start:  # before the window: only sets the starting values
            for k in range(stages):
                values[k][0] = current[k]
            continue
        if until_ns is not None and e["t1"] > until_ns:
            continue  # still counts for the peaks
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


def step_peaks(events: Events, *, stages: int, measure: str = "act_bytes", origin_ns: int | None = None,
               window_s: float | None = None) -> list[list[StepPeak]]:
    """Per stage, the peak held during each optimizer step, in time order. Consecutive actions of one
    stage on the same step (`step_view.step_of`) and process generation form one step; STARTUP spans
    are left out. With `window_s`, only actions ending in the last `window_s` seconds."""
    _, _, scale = _check_measure(measure)
    origin = time_origin(events) if origin_ns is None else origin_ns
    acts = [e for e in events if e["kind"] != Kind.STARTUP]
    if window_s is not None and acts:
        cutoff = max(e["t1"] for e in acts) - int(window_s * 1e9)
        acts = [e for e in acts if e["t1"] >= cutoff]
    out: list[list[StepPeak]] = [[] for _ in range(stages)]
    open_: list[list[Any] | None] = [None] * stages  # [step, gen, t0, t1, peak]
    for e in sorted(acts, key=lambda e: e["t1"]):
        s = e["stage"]
        if not 0 <= s < stages:
            raise ValueError(f"event of stage {s} in a {stages}-stage memory chart: {e}")
        key = (step_of(e), e.get("gen") or 0)
        v = (e.get(measure) or 0) * scale
        g = open_[s]
        if g is not None and (g[0], g[1]) == key:
            g[2], g[3], g[4] = min(g[2], e["t0"]), max(g[3], e["t1"]), max(g[4], v)
            continue
        if g is not None:
            out[s].append(StepPeak(step=g[0], t0_s=to_s(g[2], origin), t1_s=to_s(g[3], origin), peak=g[4]))
        open_[s] = [key[0], key[1], e["t0"], e["t1"], v]
    for s, g in enumerate(open_):
        if g is not None:
            out[s].append(StepPeak(step=g[0], t0_s=to_s(g[2], origin), t1_s=to_s(g[3], origin), peak=g[4]))
    return out


def envelope_xy(peaks: Sequence[StepPeak]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, y and step per point of a step line (shape "hv") through `peaks`. Where the next step
    starts later than the step before it lasted (an outage, a start-up), the line drops to 0 in
    between (step 0 there): nothing was recorded (a fill under the line would otherwise bridge it)."""
    xs: list[float] = []
    ys: list[float] = []
    ns: list[int] = []
    for i, p in enumerate(peaks):
        if i and p.t0_s - peaks[i - 1].t1_s > max(0.5, peaks[i - 1].t1_s - peaks[i - 1].t0_s):
            xs.append(peaks[i - 1].t1_s)
            ys.append(0.0)
            ns.append(0)
        xs += [p.t0_s, p.t1_s]
        ys += [p.peak, p.peak]
        ns += [p.step, p.step]
    # numpy arrays: plotly neither deep-copies nor walks them, and sends them as typed arrays
    return np.round(np.asarray(xs, dtype=float), 6), np.round(np.asarray(ys, dtype=float), 4), np.asarray(ns)


def envelope_trace(peaks: Sequence[StepPeak], *, stage: int, stages: int, unit: str, axes: tuple[str, str],
                   name: str | None = None, showlegend: bool = False, colour: str | None = None,
                   dash: str = "solid") -> dict[str, Any]:
    xs, ys, ns = envelope_xy(peaks)
    colour = colour or stage_colour(stage, stages)
    return dict(type="scatter", x=xs, y=ys, customdata=ns, mode="lines", xaxis=axes[0], yaxis=axes[1],
                line=dict(color=colour, width=2, shape="hv", dash=dash), fill="tozeroy",
                fillcolor=with_alpha(colour, 0.14),
                name=name or f"stage {stage} peak per step", legendgroup=f"stage{stage}", showlegend=showlegend,
                hovertemplate=f"stage {stage} · step %{{customdata}}: peak %{{y:.3g}} {unit}<extra></extra>")


def memory_traces(grid: MemoryGrid, *, showlegend: bool = True, axes: tuple[str, str] = ("x", "y"),
                  label_prefix: str = "") -> list[dict[str, Any]]:
    """One after-action step line per stage (x in seconds), all on the same axes."""
    t = np.round(np.asarray(grid.t_ms) / 1e3, 6)
    k = len(grid.values)
    return [dict(type="scatter", x=t, y=np.round(np.asarray(series), 4), mode="lines", xaxis=axes[0], yaxis=axes[1],
                 line=dict(color=stage_colour(s, k), width=2, shape="hv", dash=stage_dash(s)),
                 name=f"{label_prefix}stage {s}", legendgroup=f"stage{s}", showlegend=showlegend,
                 hovertemplate=f"stage {s}: %{{y:.3g}} {grid.unit} at %{{x:.3f}} s<extra></extra>")
            for s, series in enumerate(grid.values)]


def peak_bars(grid: MemoryGrid, *, axes: tuple[str, str] = ("x", "y")) -> dict[str, Any]:
    """Horizontal bars, one per stage, stage 0 on top (like the timeline lanes)."""
    stages = len(grid.peaks)
    return dict(type="bar", x=grid.peaks, y=list(range(stages)), orientation="h", showlegend=False,
                xaxis=axes[0], yaxis=axes[1], marker=dict(color=[stage_colour(s, stages) for s in range(stages)]),
                text=[amount(p, grid.unit) for p in grid.peaks], textposition="auto",
                customdata=[f"stage {s}" for s in range(stages)],
                hovertemplate=f"%{{customdata}} peak: %{{x:.3g}} {grid.unit}<extra></extra>")


def add_memory_traces(fig: go.Figure, grid: MemoryGrid, *, row: int, col: int, showlegend: bool = True) -> None:
    for trace in memory_traces(grid, showlegend=showlegend):
        del trace["xaxis"], trace["yaxis"]  # make_subplots places them
        fig.add_trace(trace, row=row, col=col)


LEFT, RIGHT = (0.0, 0.70), (0.80, 1.0)  # x domains: rows over time | peak per stage
ROW_GAP = 0.05


def with_failures(events: Events, recoveries: Sequence[dict[str, Any]], *, stages: int) -> list[dict[str, Any]]:
    """`events` plus, for each failure with `t_fail_ns`, a sample that drops the failed stage's held
    activations to 0 at that instant (its process is gone): for `memory_grid` only."""
    downs = [{"stage": r["stage"], "kind": DOWN, "t0": r["t_fail_ns"], "t1": r["t_fail_ns"]} for r in recoveries
             if r.get("t_fail_ns") is not None and 0 <= r.get("stage", -1) < stages]
    return [*events, *downs] if downs else list(events)


def _outage_shapes(recoveries: Sequence[dict[str, Any]], *, stages: int, origin_ns: int,
                   end_ns: int, from_ns: int | None = None) -> list[dict[str, Any]]:
    """The timeline's failure band on the memory rows: failure -> restore (-> `end_ns` while away); with
    `from_ns`, only what lies after it (a live window's start)."""
    out = []
    for r in recoveries:
        if r.get("t_fail_ns") is None or not 0 <= r.get("stage", -1) < stages:
            continue
        fail_ns, back_ns = r["t_fail_ns"], absence_end_ns(r) or max(end_ns, r["t_fail_ns"])
        if from_ns is not None:
            if back_ns < from_ns:
                continue
            fail_ns = max(fail_ns, from_ns)
        x0 = round(to_s(fail_ns, origin_ns), 6)
        x1 = round(to_s(back_ns, origin_ns), 6)
        for s in range(stages) if r.get("kind") == "global" else [r["stage"]]:
            ax = "" if s == 0 else str(s + 1)
            out.append(dict(type="rect", xref=f"x{ax}", yref=f"y{ax} domain", x0=x0, x1=x1, y0=0, y1=1,
                            layer="below", fillcolor=FAILURE_COLOURS["band"], line=dict(width=0),
                            name="failure-band"))
    return out


def _events_in(events: Events, lo_ns: int, hi_ns: int) -> int:
    return sum(1 for e in events if e["t1"] >= lo_ns and e["t0"] <= hi_ns)


def memory_figure(events: list[dict[str, Any]], *, stages: int, title: str = "", measure: str = "act_bytes",
                  window_s: float | None = None, origin_ns: int | None = None,
                  peak_bytes: Sequence[int] | None = None, uirevision: str = "memory", unit: str | None = None,
                  x_range: tuple[float, float] | None = None, detail: bool | None = None,
                  peak_inflight: Sequence[float] | None = None, sampled_peaks: Sequence[float] | None = None,
                  recoveries: Sequence[dict[str, Any]] = ()) -> go.Figure:
    """Left: one row per stage (stage 0 on top, shared time axis and value scale): the per-step
    peak envelope, and the per-micro-batch detail when few actions are in view. Right: each stage's
    peak.

    unit: "MiB" (measured `act_bytes`) or "microbatches" (`inflight`, micro-batches held);
      overrides `measure` ("act_bytes" / "inflight", the older spelling) when given.
    window_s: only the last `window_s` seconds (None = all); origin_ns: time zero (default: the
      earliest event, as on the timeline).
    x_range: (x0, x1) seconds to show (e.g. the timeline's `failure_window`); default: from the
      origin (0) to the last action, like the timeline, or autorange with `window_s`.
    detail: draw the per-micro-batch step function (default: when at most DETAIL_MAX_EVENTS
      actions are in the window / x_range).
    peak_bytes: per-stage peaks from metrics.json (`per_stage[s].peak_activation_bytes`, which
      also sees transients inside an action), used in MiB; peak_inflight: the same for
      micro-batches (`peak_inflight_microbatches`). Default: the highest after-action sample, over
      `events` or, given `sampled_peaks` (per stage, in the measure's own unit: bytes or
      micro-batches), over the whole run when `events` is only a window of it (a live view's).
    recoveries: recovery records (as for the timeline): the failed stage's row drops to 0 at the
      failure (its process and its activations are gone), and the outage is shaded like the
      timeline's band (every row for a global rollback)."""
    if stages < 1:
        raise ValueError(f"stages must be at least 1 (got {stages})")
    measure = measure_for(unit, measure)
    what, unit_text, _ = _check_measure(measure)
    origin = time_origin(events) if origin_ns is None else origin_ns
    envelopes = step_peaks(events, stages=stages, measure=measure, origin_ns=origin, window_s=window_s)
    end = max((e["t1"] for e in events), default=origin)
    lo_ns = origin if window_s is None else max(origin, end - int(window_s * 1e9))
    if window_s is not None and x_range is None:
        # the axis autoranges over what is drawn (a live view's user zoom must survive its redraws, so no
        # range is pinned): a step or an outage that began before the window is drawn from its start only,
        # or "the last 1.5 s" spans 16 s of axis (a step across a recovery)
        lo_s = to_s(lo_ns, origin)
        envelopes = [[dataclasses.replace(p, t0_s=max(p.t0_s, lo_s)) for p in env if p.t1_s >= lo_s]
                     for env in envelopes]
    hi_ns = end
    if x_range is not None:
        lo_ns, hi_ns = max(lo_ns, origin + int(x_range[0] * 1e9)), origin + int(x_range[1] * 1e9)
    if detail is None:
        detail = _events_in(events, lo_ns, hi_ns) <= DETAIL_MAX_EVENTS
    if detail:
        grid = memory_grid(with_failures(events, recoveries, stages=stages), stages=stages, measure=measure,
                           origin_ns=origin, window_s=window_s, since_ns=lo_ns if x_range is not None else None,
                           until_ns=hi_ns if x_range is not None else None)
    else:  # the peaks only: no grid to sample
        scale = MEASURES[measure][2]
        peaks = [0.0] * stages
        for e in events:
            if 0 <= e["stage"] < stages:
                peaks[e["stage"]] = max(peaks[e["stage"]], (e.get(measure) or 0) * scale)
        grid = MemoryGrid(t_ms=[], values=[[] for _ in range(stages)], peaks=peaks, unit=unit_text)
    peak_title = "peak per stage"
    if sampled_peaks is not None:
        if len(sampled_peaks) != stages:
            raise ValueError(f"sampled_peaks needs one value per stage ({stages}, got {len(sampled_peaks)})")
        grid.peaks = [v * MEASURES[measure][2] for v in sampled_peaks]
    given = peak_bytes if measure == "act_bytes" else peak_inflight
    if given is not None:
        if len(given) != stages:
            raise ValueError(f"peak_bytes / peak_inflight need one value per stage ({stages}, got {len(given)})")
        grid.peaks = [b / 2**20 for b in given] if measure == "act_bytes" else [float(v) for v in given]
        peak_title = "measured peak per stage"
    top = max([p.peak for env in envelopes for p in env] + (list(np.max(grid.values, axis=1)) if detail else [])
              + [0.0]) * 1.12 or 1.0
    h = (1 - ROW_GAP * (stages - 1)) / stages
    layout: dict[str, Any] = {}
    data: list[dict[str, Any]] = []
    t = np.round(np.asarray(grid.t_ms) / 1e3, 6)
    for s in range(stages):
        ax = "" if s == 0 else str(s + 1)
        top_y = 1 - s * (h + ROW_GAP)
        xaxis: dict[str, Any] = dict(domain=LEFT, anchor=f"y{ax}", showticklabels=s == stages - 1, ticksuffix=" s")
        if s:
            xaxis["matches"] = "x"
        if s == stages - 1:
            xaxis["title"] = dict(text=X_TITLE)
        if x_range is not None:
            xaxis.update(range=[round(x_range[0], 6), round(x_range[1], 6)], autorange=False)
        elif window_s is None and events:  # from the run's start, like the timeline (start-up included)
            xaxis.update(range=[round(min(0.0, to_s(time_origin(events), origin)), 6), round(to_s(end, origin), 6)])
        layout[f"xaxis{ax}"] = xaxis
        layout[f"yaxis{ax}"] = dict(domain=[max(0.0, top_y - h), top_y], anchor=f"x{ax}", range=[0, top],
                                    title=dict(text=f"stage {s}<br>{unit_text}", font=dict(size=11)), nticks=4)
        axes = (f"x{ax}", f"y{ax}")
        data.append(envelope_trace(envelopes[s], stage=s, stages=stages, unit=unit_text, axes=axes,
                                   showlegend=s == 0, name="peak per step" if s == 0 else None))
        data[-1]["legendgroup"] = "envelope"
        if detail:
            data.append(dict(type="scatter", x=t, y=np.round(np.asarray(grid.values[s]), 4), mode="lines",
                             xaxis=axes[0], yaxis=axes[1],
                             line=dict(color=stage_colour(s, stages), width=1, shape="hv"),
                             name="after each action", legendgroup="detail", showlegend=s == 0, opacity=0.9,
                             hovertemplate=f"stage {s}: %{{y:.3g}} {unit_text} at %{{x:.3f}} s<extra></extra>"))
    layout["shapes"] = _outage_shapes(recoveries, stages=stages, origin_ns=origin, end_ns=end,
                                      from_ns=lo_ns if window_s is not None and x_range is None else None)
    k = str(stages + 1)
    right_y = lane_axis(stages)
    right_y.update(anchor=f"x{k}", fixedrange=False, domain=[0, 1])
    layout.update({f"xaxis{k}": dict(domain=RIGHT, anchor=f"y{k}", title=dict(text=unit_text), rangemode="tozero"),
                   f"yaxis{k}": right_y,
                   # the legend names the lines (peak per step, after each action): short titles fit 820 px
                   "annotations": [subplot_title(f"{what} held per stage", x0=LEFT[0], x1=LEFT[1], align="left"),
                                   subplot_title(peak_title, x0=RIGHT[0], x1=RIGHT[1], align="right")]})
    data.append(peak_bars(grid, axes=(f"x{k}", f"y{k}")))
    return fast_figure(data, layout, title=title, height=max(300, 150 + 95 * stages), subplot_titles=True,
                       uirevision=uirevision)
