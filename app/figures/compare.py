"""Side-by-side figures of several runs (Compare tab, Explain tab, notebooks).

Every run is drawn from its own first action (time 0; its start-up, if recorded, at negative
times), on one common time axis in seconds, so the lengths of the runs and the places where stages
wait can be compared by eye. Under each measured timeline, the schedule simulator's prediction for
the same method, K and m, costed with the run's own mean action times (`predicted_events`).

Colours (zerolock_core/viz/palette.py): bars by action kind, runs by method (loss curves, peaks, summary bars),
stages by a slate shade with a dash pattern."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from zerolock_core.rundir.metrics import Metrics

from ..run_label import readout_text as configured_readout, shown_readout
from .chance import chance_level
from .layout import amount, frame
from .memory import DETAIL_MAX_EVENTS, MEASURES, MemoryGrid, add_memory_traces, envelope_trace, memory_grid, \
    step_peaks, with_failures
from zerolock_core.viz.palette import NEUTRAL, dash, method_colour, method_label, stage_dash
from zerolock_core.config.readout_spec import ReadoutSpec
from zerolock_core.methods import LOCAL_METHODS, every_chunk_trains
from zerolock_core.schedule import builders
from zerolock_core.vocabulary import BUSY_KINDS, Kind
from .training import chunk_index, placeholder_figure
from .simulated import events_from_simulation
from .timebase import first_steps_s, time_end, training_origin, to_s
from .timeline import LANE_HEIGHT_PX, WEBGL_THRESHOLD, add_timeline_traces, style_lanes

COMPARE_X_TITLE = "seconds since the run's first action (start-up before 0)"
SIMULATED_METHODS = builders.METHODS  # every method with a one-stage-per-device schedule (methods.py)


@dataclass(kw_only=True)
class Series:
    """One run to compare: its label, events, number of stages, and (optionally) its record and config
    (default: the record's). The numbers every Compare view and the verdict read are defined here, once."""
    label: str
    events: list[dict[str, Any]]
    stages: int
    method: str = ""
    metrics: Metrics | None = field(default=None)
    config: dict[str, Any] | None = field(default=None)

    @property
    def short(self) -> str:
        """The method, and the readout when it is not the plain head ("ZeroLock · top-lora:last")."""
        if not self.method:
            return self.label
        return " · ".join(p for p in (method_label(self.method), self.readout) if p)

    @property
    def run_config(self) -> dict[str, Any]:
        return self.config or (self.metrics.config if self.metrics else {})

    @property
    def readout(self) -> str:
        """The run's --readout where some chunk reads through it ("" for the plain head: run_label.py)."""
        return shown_readout(self.run_config, method=self.method, stages=self.stages)

    @property
    def samples_per_s(self) -> float | None:
        """Throughput: samples trained / training time (the record's; None before it is written)."""
        return self.metrics.throughput_samples_per_s if self.metrics and self.metrics.throughput_samples_per_s \
            else None

    @property
    def accuracy(self) -> float | None:
        """The final eval's headline accuracy (label accuracy, or token accuracy for a response task)."""
        return self.metrics.headline_accuracy if self.metrics else None

    @property
    def activation_peaks(self) -> list[int]:
        """Each stage's measured peak of held activation bytes (the record's; [] when it has none)."""
        per_stage = self.metrics.per_stage if self.metrics else []
        if len(per_stage) != self.stages or any(p.get("peak_activation_bytes") is None for p in per_stage):
            return []
        return [int(p["peak_activation_bytes"]) for p in per_stage]

    @property
    def peak_activation_bytes(self) -> int | None:
        """The busiest stage's peak: what a device of the pipeline must hold."""
        return max(self.activation_peaks) if self.activation_peaks else None

    @property
    def readout_text(self) -> str:
        """The run's --readout as configured (the plain head when the config says nothing)."""
        return configured_readout(self.run_config)

    @property
    def stage_layers(self) -> list[tuple[int, int]] | None:
        """Per stage, (its chunk's decoder layers, the layers its readout runs on top of them: a copy of the
        model's top N or N sampled later layers, readout_spec.py), from the record's chunk bounds; None when
        the record has no bounds or the readout is not one this version knows."""
        bounds = [(int(b[0]), int(b[1])) for b in (self.metrics.layers if self.metrics else [])]
        if len(bounds) != self.stages:
            return None
        try:
            spec = ReadoutSpec.of_model(self.readout_text, bounds)
            trains = every_chunk_trains(self.method)
            return [(end - first, len(spec.of_chunk(k, self.stages, every_chunk_trains=trains)
                                      .layer_indices(bounds[-1][1], after=end)))
                    for k, (first, end) in enumerate(bounds)]
        except ValueError:
            return None


def unique_names(series: Sequence[Series]) -> list[str]:
    """Each run's short name, or its label where two runs share the short one (so bars and legend entries
    of two ZeroLock runs never fall on one category)."""
    shorts = [s.short for s in series]
    return [s.short if shorts.count(s.short) == 1 else s.label for s in series]


def _split(series: Sequence[Series]) -> tuple[list[Series], str]:
    """The runs with per-stage telemetry, and a footnote naming those without (reference runs)."""
    drawn = [s for s in series if s.events]
    others = [s.label for s in series if not s.events]
    note = f"Not shown: {', '.join(others)} (single process, no per-stage telemetry)." if others else ""
    return drawn, note


def _footnote(fig: go.Figure, text: str) -> None:
    if text:
        fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0, y=1,
                           xanchor="left", yanchor="bottom", yshift=22, font=dict(size=11, color=NEUTRAL["muted"]))


def focus_range(series: Sequence[Series], steps: int | None) -> list[float] | None:
    """The x range (s from each run's first action) showing every run's first `steps` optimizer
    steps (None: show everything)."""
    if not steps:
        return None
    ends = [first_steps_s(s.events, steps, origin_ns=training_origin(s.events)) for s in series if s.events]
    total = [first_steps_s(s.events, steps + 1, origin_ns=training_origin(s.events)) for s in series if s.events]
    if not ends or any(e is None for e in ends) or all(t is None for t in total):
        return None  # the runs are too short for a zoom to help
    return [0.0, 1.02 * max(ends)]


def predicted_events(s: Series, *, windows: int = 3) -> list[dict[str, Any]] | None:
    """The schedule simulator's timeline for run `s`: its method, K, m (from its config), the first
    `windows` optimizer steps, each action costed with the run's own mean duration per stage and
    kind (after its first step when it has more), its hidden-state bytes and its link profile
    (zerolock_core.schedule.spans: the simulator benchmark's costing). None when the run is not a
    pipeline run of a simulated method, or has no config or no actions yet."""
    from zerolock_core.config.run_config import LinkConfig
    from zerolock_core.runtime.link_emulation import link_for
    from zerolock_core.schedule import build_schedule, simulate
    from zerolock_core.schedule.spans import costs_from_spans, spans_from_events, window_start

    train = s.run_config.get("train") or {}
    method = train.get("method", s.method)
    acts = [e for e in s.events if e["kind"] != Kind.STARTUP]
    if method not in SIMULATED_METHODS or not acts or not train.get("microbatches"):
        return None
    m, steps = int(train["microbatches"]), int(train.get("steps") or windows)
    windows = max(1, min(windows, steps))
    spans = spans_from_events(acts)
    try:
        skip = window_start(spans, microbatches=m, skip_windows=1)
    except ValueError:
        skip = 0.0
    hidden = max((e.get("sent") or 0 for e in acts if e["kind"] == Kind.SF), default=0)
    try:
        costs = costs_from_spans(spans, stages=s.stages, hidden_bytes=hidden,
                                 grad_bytes=0 if method in LOCAL_METHODS else hidden, skip_before=skip)
        link = link_for(LinkConfig(**(s.run_config.get("link") or {})))
        sched = build_schedule(method, stages=s.stages, microbatches=m, windows=windows,
                               frozen_stages=int(train.get("frozen_stages") or 0))
        depth = train.get("inflight_depth")
        sim = simulate(sched, costs=costs, link=link, inflight_limit=depth if depth else None)
    except (ValueError, TypeError, KeyError):
        return None
    per_mb = max((e.get("act_bytes") or 0) for e in acts) // max(1, max((e.get("inflight") or 0) for e in acts))
    return events_from_simulation(sim, bytes_per_microbatch=per_mb, hidden_bytes=hidden,
                                  grad_bytes=0 if method in LOCAL_METHODS else hidden)


PREDICTED = "predicted by the simulator (the run's mean action times)"


def predicted_title(s: Series, sim: list[dict[str, Any]]) -> str:
    """What the simulated row costs, on the figure: how long its steps take, each stage's compute per
    micro-batch and the layers it runs — a readout's copies included, so a predicted ZeroLock step slower
    than 1F1B's says why ("ZeroLock · top-lora:last: predicted … 3 steps in 1.40 s<br>F+L per micro-batch
    107 / 112 / 54 ms on 3+2 / 3+2 / 2 layers (the chunk's + its readout's)": two lines)."""
    steps = max((e["step"] for e in sim if e["kind"] == Kind.STEP), default=0)
    head = f"{s.short}: {PREDICTED}"
    if not steps:
        return head
    m = int((s.run_config.get("train") or {}).get("microbatches") or 1)
    busy = [sum(e["t1"] - e["t0"] for e in sim if e["stage"] == k and e["kind"] in BUSY_KINDS
                and e["kind"] != Kind.STEP) / 1e6 / (m * steps) for k in range(s.stages)]
    kinds = "+".join(k for k in (Kind.F, Kind.L, Kind.B, Kind.W) if any(e["kind"] == k for e in sim))
    text = f"{head}: {steps} steps in {to_s(time_end(sim), 0):.2f} s<br>{kinds} per micro-batch " \
           f"{' / '.join(f'{b:.0f}' for b in busy)} ms"
    layers = s.stage_layers
    if layers:
        text += f" on {' / '.join(f'{own}+{extra}' if extra else str(own) for own, extra in layers)} layers"
        text += " (the chunk's + its readout's)" if any(extra for _, extra in layers) else ""
    return text


def compare_timeline_figure(series: Sequence[Series], *, title: str = "", initial_steps: int | None = 3,
                            webgl_threshold: int = WEBGL_THRESHOLD, predicted: bool = True,
                            x_title: str = COMPARE_X_TITLE) -> go.Figure:
    """One row of stage lanes per run, all on one time axis (s since each run's first action).
    Long runs open zoomed on their first `initial_steps` optimizer steps (autoscale shows all).
    predicted: under each run whose config is known, the simulator's timeline for the same method,
    K and m costed with the run's measured mean action times (`predicted_events`).
    x_title: the time axis's title."""
    if not series:
        raise ValueError("compare_timeline_figure needs at least one run")
    series, note = _split(series)
    if not series:
        return placeholder_figure(note, title=title, height=200)
    focus = focus_range(series, initial_steps)
    rows: list[tuple[str, list[dict[str, Any]], int, int]] = []  # label, events, stages, origin
    for s in series:
        rows.append((s.label, s.events, s.stages, training_origin(s.events)))
        sim = predicted_events(s, windows=initial_steps or 3) if predicted else None
        if sim:
            rows.append((predicted_title(s, sim), sim, s.stages, 0))
    total = sum(len(r[1]) for r in rows)
    span = (focus[1] - focus[0]) if focus else max(to_s(time_end(ev), o) for _, ev, _, o in rows)
    heights = [max(1, r[2]) for r in rows]
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.28 / len(rows),
                        row_heights=heights, subplot_titles=[r[0] for r in rows])
    seen: set[str] = set()
    for i, (_, events, stages, origin) in enumerate(rows, start=1):
        in_view = events if focus is None else [e for e in events if to_s(e["t0"], origin) <= focus[1]]
        add_timeline_traces(fig, events, stages=stages, origin_ns=origin, webgl=total > webgl_threshold,
                            row=i, col=1, legend_seen=seen, view_span_s=span, labels=len(in_view) <= 150)
        style_lanes(fig, stages=stages, row=i, col=1)
    fig.update_xaxes(title_text=x_title, row=len(rows), col=1)
    fig.update_xaxes(range=focus, ticksuffix=" s")
    frame(fig, title=title, height=110 + sum(LANE_HEIGHT_PX * h + 60 for h in heights), subplot_titles=True,
          uirevision="compare-timeline")
    fig.update_layout(barmode="overlay", bargap=0)
    _footnote(fig, note)
    return fig


def _peaks(s: Series, grid: MemoryGrid, measure: str) -> list[float]:
    """Measured peak per stage from the run's record when it is there (it also sees transients inside an
    action), else the peak of the after-action samples."""
    per_stage = s.metrics.per_stage if s.metrics else []
    if measure == "act_bytes" and s.activation_peaks:
        return [b / 2**20 for b in s.activation_peaks]
    if measure == "inflight" and len(per_stage) == s.stages:
        return [float(p["peak_inflight_microbatches"]) for p in per_stage]
    return grid.peaks


def compare_memory_figure(series: Sequence[Series], *, measure: str = "act_bytes", title: str = "",
                          initial_steps: int | None = 3, x_title: str = COMPARE_X_TITLE) -> go.Figure:
    """Left: per run, every stage's held activations over time (shared time and value axes; a
    slate shade and dash per stage): after each action for short runs, the per-step peak envelope
    past DETAIL_MAX_EVENTS actions; opened on the first `initial_steps` steps like the timelines.
    Right: the peak per stage side by side, one bar per run in its method's colour.
    x_title: the time axis's title."""
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
    grids = [memory_grid(with_failures(s.events, s.metrics.recovery if s.metrics else [], stages=s.stages),
                         stages=s.stages, measure=measure, origin_ns=training_origin(s.events)) for s in series]
    top = 1.05 * max((max(v, default=0) for g in grids for v in g.values), default=0) or 1.0
    for i, (s, grid, name) in enumerate(zip(series, grids, unique_names(series)), start=1):
        if len(s.events) <= DETAIL_MAX_EVENTS:
            add_memory_traces(fig, grid, row=i, col=1, showlegend=i == 1)
        else:
            for k, env in enumerate(step_peaks(s.events, stages=s.stages, measure=measure,
                                               origin_ns=training_origin(s.events))):
                trace = envelope_trace(env, stage=k, stages=s.stages, unit=unit, axes=("x", "y"),
                                       name=f"stage {k} peak per step", showlegend=i == 1, dash=stage_dash(k))
                del trace["xaxis"], trace["yaxis"]
                trace["legendgroup"] = f"stage{k}"
                fig.add_trace(trace, row=i, col=1)
        fig.update_yaxes(title_text=unit, range=[0, top], row=i, col=1)  # one scale for every run
        peaks = _peaks(s, grid, measure)
        if any(peaks):
            fig.add_trace(go.Bar(  # named in the legend: a run's name beside a short bar would be cut off
                x=peaks, y=list(range(s.stages)), orientation="h", name=f"{name}: peak", showlegend=True,
                marker=dict(color=method_colour(s.method)), offsetgroup=str(i),
                text=[amount(p, unit) for p in peaks], textposition="auto",
                insidetextanchor="start", customdata=[f"stage {k}" for k in range(s.stages)],
                hovertemplate=f"{s.label}<br>%{{customdata}} peak %{{x:.3g}} {unit}<extra></extra>"), row=1, col=2)
    fig.update_yaxes(tickmode="array", tickvals=list(range(stages)),
                     ticktext=[f"stage {k}" for k in range(stages)], range=[stages - 0.5, -0.5], row=1, col=2)
    fig.update_xaxes(title_text=f"peak ({unit})", rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title_text=x_title, row=n, col=1)
    focus = focus_range(series, initial_steps)
    for i in range(1, n + 1):
        fig.update_xaxes(range=focus, ticksuffix=" s", row=i, col=1)
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


TASK_LOSS_TITLE = "task loss of the model's output (CE at the last chunk): comparable across methods"
LOCAL_LOSS_TITLE = "earlier chunks' local objectives<br>(α·CE + (1−α)·KL: not the task loss)"
MARKERS_UP_TO = 40  # points per curve: markers on the lines up to this many (overlapping curves stay apart)


def task_curve(curves: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The curve of the model's own output: BP's one curve, a local method's last chunk. Its `task`
    series is the task CE under every method (a local method's `loss` adds the consistency term)."""
    chunks = [c for c in curves if chunk_index(c.get("chunk", "")) is not None]
    if chunks:
        return max(chunks, key=lambda c: chunk_index(c["chunk"]))
    return curves[0] if curves else None


def _line(s: Series, i: int, *, width: float, main: bool) -> dict[str, Any]:
    """Method colour; runs of one method differ by dash (and every curve by marker where points are few)."""
    return dict(color=method_colour(s.method), width=width, dash=dash(i) if main else stage_dash(1 + i))


def add_loss_curves(fig: go.Figure, series: Sequence[Series], *, row: int, col: int,
                    local_col: int | None = None) -> int:
    """Every run's task loss per step (`task_curve`'s `task`, the one loss all methods share), overlaid in
    its method's colour, runs told apart by dash and marker; with `local_col`, the local methods' other
    chunks' own objectives in that panel (thin, dashed), never on the task loss's axis. Returns how many
    curves were drawn."""
    drawn = 0
    symbols = ("circle", "square", "diamond", "triangle-up", "x", "cross")
    for i, (s, name) in enumerate(zip(series, unique_names(series))):
        curves = s.metrics.curves if s.metrics else []
        main = task_curve(curves)
        if main is None:
            continue
        y = main.get("task") or main["loss"]
        few = len(main["step"]) <= MARKERS_UP_TO
        fig.add_trace(go.Scatter(x=main["step"], y=y, mode="lines+markers" if few else "lines", name=name,
                                 legendgroup=s.label, line=_line(s, i, width=2.5, main=True),
                                 marker=dict(symbol=symbols[i % len(symbols)], size=6),
                                 hovertemplate=f"{name} · step %{{x}}: task loss %{{y:.3f}}<extra></extra>"),
                      row=row, col=col)
        drawn += 1
        if local_col is None:
            continue
        for c in curves:
            k = chunk_index(c.get("chunk", ""))
            if c is main or k is None:
                continue
            label = f"{name} chunk {k} (local)"
            fig.add_trace(go.Scatter(x=c["step"], y=c["loss"], mode="lines", name=label, legendgroup=s.label,
                                     line=_line(s, k, width=1.5, main=False), opacity=0.8,
                                     hovertemplate=f"{label} · step %{{x}}: local loss %{{y:.3f}}<extra></extra>"),
                          row=row, col=local_col)
            drawn += 1
    return drawn


def has_local_curves(series: Sequence[Series]) -> bool:
    return any(len([c for c in (s.metrics.curves if s.metrics else []) if chunk_index(c.get("chunk", "")) is not None])
               > 1 for s in series)


def _step_dtick(series: Sequence[Series]) -> int:
    """Whole steps, at most about 10 ticks."""
    last = max((c["step"][-1] for s in series for c in (s.metrics.curves if s.metrics else []) if c.get("step")),
               default=1)
    return max(1, -(-last // 10))


def compare_loss_figure(series: Sequence[Series], *, title: str = "") -> go.Figure:
    """Every run's task loss on one chart, and the local methods' other chunks' objectives beside it
    (see `add_loss_curves`)."""
    if not series:
        raise ValueError("compare_loss_figure needs at least one run")
    local = has_local_curves(series)
    fig = make_subplots(rows=1, cols=2 if local else 1, horizontal_spacing=0.1,
                        subplot_titles=(TASK_LOSS_TITLE, LOCAL_LOSS_TITLE) if local else (TASK_LOSS_TITLE,))
    if not add_loss_curves(fig, series, row=1, col=1, local_col=2 if local else None):
        return placeholder_figure("No loss curves yet: they come with each run's record (metrics.json).", title=title,
                                  height=200)
    fig.update_xaxes(title_text="optimizer step", dtick=_step_dtick(series))
    fig.update_yaxes(title_text="loss (nats)")
    frame(fig, title=title, height=340, left=60, subplot_titles=True)
    return fig


def compare_summary_figure(series: Sequence[Series], *, title: str = "", chance: float | None = None,
                           with_loss: bool = True) -> go.Figure:
    """Throughput, eval label accuracy (with the chance line) and bubble per run (one bar each,
    coloured by method); with_loss: above them, every run's training loss overlaid.

    chance: the accuracy line to draw (default `chance_level` of the first run that has one)."""
    if not series:
        raise ValueError("compare_summary_figure needs at least one run")
    has_loss = with_loss and any(s.metrics and s.metrics.curves for s in series)
    level = (chance, "chance") if chance is not None else next(
        (c for c in (chance_level(s.metrics, s.config) for s in series) if c is not None), None)
    accuracy = "eval label accuracy" + (f" (- - {level[1]}: {level[0]:.2f})" if level is not None else "")
    titles = ("throughput (samples/s)", accuracy, "bubble (% idle)")
    local = has_loss and has_local_curves(series)
    if has_loss:
        # the task loss over two columns, the local objectives in the third (when there are any)
        top = [{"colspan": 2}, None, {}] if local else [{"colspan": 3}, None, None]
        fig = make_subplots(rows=2, cols=3, horizontal_spacing=0.09, vertical_spacing=0.2, row_heights=[0.55, 0.45],
                            specs=[top, [{}, {}, {}]],
                            subplot_titles=(TASK_LOSS_TITLE, *((LOCAL_LOSS_TITLE,) if local else ()), *titles))
    else:
        fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.09, subplot_titles=titles)
    bar_row = 2 if has_loss else 1
    labels = unique_names(series)
    colours = [method_colour(s.method) for s in series]

    columns = [
        [s.samples_per_s for s in series],
        [s.accuracy for s in series],
        [100 * s.metrics.bubble_fraction if s.metrics and s.metrics.bubble_fraction is not None else None
         for s in series],
    ]
    fmt = ("{:.1f}", "{:.3f}", "{:.0f}%")
    for col, (values, f) in enumerate(zip(columns, fmt), start=1):
        fig.add_trace(go.Bar(x=labels, y=[v if v is not None else 0 for v in values], marker=dict(color=colours),
                             text=[f.format(v) if v is not None else "n/a" for v in values], textposition="auto",
                             showlegend=False, hovertemplate="%{x}: %{y:.3g}<extra></extra>"), row=bar_row, col=col)
    if level is not None:  # named in the panel's title: a label on the line would sit on the bars
        fig.add_hline(y=level[0], line_color=NEUTRAL["chance"], line_width=1.5, line_dash="dash", row=bar_row, col=2,
                      name="chance")
    fig.update_yaxes(range=[0, 1], row=bar_row, col=2)
    fig.update_yaxes(range=[0, 100], row=bar_row, col=3)
    if has_loss:
        add_loss_curves(fig, series, row=1, col=1, local_col=3 if local else None)
        for col in (1, 3) if local else (1,):
            fig.update_xaxes(title_text="optimizer step", dtick=_step_dtick(series), row=1, col=col)
            fig.update_yaxes(title_text="loss (nats)", row=1, col=col)
    frame(fig, title=title, height=620 if has_loss else 330, legend=has_loss, subplot_titles=True, left=50)
    return fig
