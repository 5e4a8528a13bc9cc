"""The figures of the lessons, drawn from the recorded example runs (or, for the last lesson, the
project's committed depth study and frontier), with what to look at outlined: every highlight is
a shape or an annotation named `HIGHLIGHT` (the tests and the browser tier find them by that name).

`lesson_view(lesson)` returns the step's figure and its one headline, every number of which is read
from the same record the figure draws (nothing here is typed in by hand). Each figure shows only the
legend entries its step talks about, has no title of its own (the narration beside it has one) and
keeps its legend in the top margin, where plotly makes room for it at any width.
"""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any, Iterable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from zerolock_core.analysis.frontier_arms import PIPEDREAM_ARM, readout_arm_name
from zerolock_core.config.readout_spec import DEPTH_READOUT
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.viz.palette import HIGHLIGHT_COLOUR, METHOD_COLOURS, NEUTRAL, method_colour, method_label
from zerolock_core.vocabulary import Kind

from .frontier_lesson import frontier_view
from .lesson_frame import FIGURE_HEIGHT_PX, HIGHLIGHT, LessonView, lesson_frame
from ..frontier_summary import FRONTIER, RESULTS, deepest_frontier, price_words, seeds_words
from ..lessons import RECORDINGS, Lesson, recording_name
from ..run_data import RunData, load_run
from .timebase import first_steps_s, training_origin, to_s
from .timeline import add_timeline_traces, failure_marks, style_lanes

DEPTH_STUDY = RESULTS / "depth-study.json"
SHOWN_STEPS = 2  # the schedule lessons open on this many optimizer steps
MAX_OUTLINES_PER_LANE = 2
BAR_TEXT_PX = 12
ROW_LABEL_PX = 128  # the left margin of the stacked timelines: a row's label over its lanes' names


def recorded(lesson: Lesson) -> list[RunData]:
    """The lesson's recorded runs, in its order; FileNotFoundError naming the missing one."""
    out = []
    for form, method in lesson.shown:
        rd = RunDir(RECORDINGS / recording_name(form, method))
        out.append(load_run(rd, name=rd.name))
    return out


def readout_of(d: RunData) -> str:
    return (d.config.get("model") or {}).get("readout", "head")


def readout_words(d: RunData) -> str:
    return "the paper's frozen head" if readout_of(d) == "head" else f"`{readout_of(d)}`"


def run_name(d: RunData) -> str:
    """"GPipe"; a ZeroLock run also names its readout ("ZeroLock · top-lora:last")."""
    return method_label(d.method) + (f" · {readout_of(d)}" if d.method == "zerolock" else "")


def only_in_legend(fig: go.Figure, groups: Iterable[str]) -> go.Figure:
    """Keep in the legend only the kinds the step talks about (the bars of the others are still drawn)."""
    keep = set(groups)
    for trace in fig.data:
        if trace.showlegend is not False and (trace.legendgroup or trace.name) not in keep:
            trace.showlegend = False
    return fig


def rename(fig: go.Figure, names: dict[str, str]) -> go.Figure:
    """The legend in the step's own words ("waiting for a gradient" for RB)."""
    for trace in fig.data:
        if trace.legendgroup in names:
            trace.name = names[trace.legendgroup]
    return fig


def _box(x0: float, x1: float, lane: int, *, row: int = 1, last_lane: int | None = None) -> dict[str, Any]:
    """An outline over `lane` (to `last_lane`) from x0 to x1 s."""
    axis = "" if row == 1 else str(row)
    return dict(type="rect", xref=f"x{axis}", yref=f"y{axis}", x0=round(x0, 6), x1=round(x1, 6), y0=lane - 0.48,
                y1=(lane if last_lane is None else last_lane) + 0.48, line=dict(color=HIGHLIGHT_COLOUR, width=2.5),
                fillcolor="rgba(0,0,0,0)", layer="above", name=HIGHLIGHT)


def _note(text: str, *, x: float, y: float, row: int = 1, **kw) -> dict[str, Any]:
    axis = "" if row == 1 else str(row)
    return dict(text=text, x=x, y=y, xref=f"x{axis}", yref=f"y{axis}", showarrow=False, name=HIGHLIGHT,
                font=dict(size=13, color=HIGHLIGHT_COLOUR), bgcolor="rgba(255,255,255,0.9)", **kw)


def stacked_timelines(rows: list[tuple[RunData, int, str]], *, x_range: tuple[float, float],
                      height: int) -> go.Figure:
    """One row of stage lanes per (run, time origin, row label), on one time axis (s from each origin),
    each row's label over its lane names in the left margin (not over the plot: the legend is there)."""
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.1)
    seen: set[str] = set()
    span = x_range[1] - x_range[0]
    for i, (d, origin, title) in enumerate(rows, start=1):
        in_view = [e for e in d.events if x_range[0] <= to_s(e["t0"], origin) <= x_range[1]]
        add_timeline_traces(fig, d.events, stages=d.stages, origin_ns=origin, webgl=False, row=i, col=1,
                            legend_seen=seen, view_span_s=span, labels=len(in_view) <= 150)
        style_lanes(fig, stages=d.stages, row=i, col=1)
        axis = "" if i == 1 else str(i)
        fig.add_annotation(text=title, x=0, xref="paper", xanchor="right", xshift=-4, y=1, yref=f"y{axis} domain",
                           yanchor="bottom", showarrow=False, font=dict(size=13), name="row-label")
    fig.update_xaxes(range=list(x_range), ticksuffix=" s", zeroline=False)
    lesson_frame(fig, height=height, left=ROW_LABEL_PX)
    fig.update_layout(barmode="overlay", bargap=0)
    return fig


# ---- 1 · the bubble -------------------------------------------------------------------------------

def gradient_waits(events: list[dict[str, Any]], *, stage: int, origin_ns: int,
                   until_s: float) -> list[tuple[float, float]]:
    """(start s, end s) of `stage`'s waits for a gradient (RB) between time 0 at `origin_ns` (the
    pipeline's first action) and `until_s`, clipped to that span."""
    out = []
    for e in events:
        if e["stage"] == stage and e["kind"] == Kind.RB:
            a, b = max(0.0, to_s(e["t0"], origin_ns)), min(until_s, to_s(e["t1"], origin_ns))
            if b > a:
                out.append((a, b))
    return sorted(out)


def gradient_wait_share(d: RunData, steps: int = SHOWN_STEPS) -> float:
    """The share of the stages' time in their first `steps` optimizer steps spent waiting for a gradient."""
    origin = training_origin(d.events)
    until = first_steps_s(d.events, steps, origin_ns=origin)
    assert until, f"{d.name} has fewer than {steps} steps"
    waited = sum(b - a for s in range(d.stages) for a, b in gradient_waits(d.events, stage=s, origin_ns=origin,
                                                                           until_s=until))
    return waited / (d.stages * until)


def bubble_view(runs: list[RunData]) -> LessonView:
    ends = [first_steps_s(d.events, SHOWN_STEPS, origin_ns=training_origin(d.events)) for d in runs]
    shares = {method_label(d.method): f"{100 * gradient_wait_share(d):.0f} %" for d in runs}
    rows = [(d, training_origin(d.events), f"<b>{method_label(d.method)}</b> {shares[method_label(d.method)]}")
            for d in runs]
    fig = stacked_timelines(rows, x_range=(0.0, 1.02 * max(ends)), height=FIGURE_HEIGHT_PX)
    for row, (d, end) in enumerate(zip(runs, ends), start=1):
        origin = training_origin(d.events)
        for stage in range(d.stages):
            waits = gradient_waits(d.events, stage=stage, origin_ns=origin, until_s=end)
            for a, b in sorted(waits, key=lambda w: w[0] - w[1])[:MAX_OUTLINES_PER_LANE]:
                fig.add_shape(_box(a, b, stage, row=row))
    fig.update_xaxes(title_text="s from each run's first action", row=len(runs), col=1)
    only_in_legend(fig, (Kind.F, Kind.B, Kind.L, Kind.RB, Kind.RF))
    rename(fig, {Kind.RB: "waiting for a gradient", Kind.RF: "waiting for input"})
    words = ", ".join(f"{name} **{share}**" for name, share in shares.items())
    return LessonView(figure=fig, headline=f"Time spent waiting for a gradient in the first {SHOWN_STEPS} "
                                           f"steps: {words}.")


# ---- 2 · the memory -------------------------------------------------------------------------------

def peak_mib(d: RunData) -> list[float]:
    return [p["peak_activation_bytes"] / 2**20 for p in d.metrics.per_stage]


def memory_view(runs: list[RunData]) -> LessonView:
    """Each run's peak activations per stage, one bar each (the runs side by side in each stage's group),
    each run's largest stage outlined."""
    fig = go.Figure()
    width = 0.8 / len(runs)
    for j, d in enumerate(runs):
        peaks = peak_mib(d)
        offset = -0.4 + j * width
        top = d.method == "zerolock" and readout_of(d) == DEPTH_READOUT
        fig.add_trace(go.Bar(
            x=list(range(d.stages)), y=peaks, name=run_name(d), width=width, offset=offset,
            marker=dict(color=method_colour(d.method), pattern=dict(shape="/" if top else "")),
            text=[f"{p:.1f}" for p in peaks], textposition="outside", textfont=dict(size=BAR_TEXT_PX),
            cliponaxis=False, hovertemplate=f"{run_name(d)}<br>stage %{{x}}: %{{y:.2f}} MiB<extra></extra>"))
        k = max(range(d.stages), key=lambda s: peaks[s])
        fig.add_shape(type="rect", xref="x", yref="y", x0=k + offset, x1=k + offset + width, y0=0, y1=peaks[k],
                      line=dict(color=HIGHLIGHT_COLOUR, width=2.5), fillcolor="rgba(0,0,0,0)", layer="above",
                      name=HIGHLIGHT)
    stages = max(d.stages for d in runs)
    fig.update_xaxes(tickmode="array", tickvals=list(range(stages)), ticktext=[f"stage {s}" for s in range(stages)])
    highest = max(max(peak_mib(d)) for d in runs)  # room over the bars for their numbers
    fig.update_yaxes(title_text="peak activations (MiB)", range=[0, 1.15 * highest])
    lesson_frame(fig, height=FIGURE_HEIGHT_PX)
    bp = next(d for d in runs if d.method == "1f1b")
    less = [f"**{max(peak_mib(bp)) / max(peak_mib(d)):.1f}×** less through {readout_words(d)}" for d in runs
            if d.method == "zerolock"]
    return LessonView(figure=fig, headline=f"Against 1F1B's {max(peak_mib(bp)):.1f} MiB, ZeroLock's largest stage "
                                           f"holds {', '.join(less)}.")


# ---- 3 · early forwarding -------------------------------------------------------------------------

def _first_actions(events: list[dict[str, Any]], stage: int, kind: str) -> dict[int, dict[str, Any]]:
    """micro-batch -> the first (process generation 0) action of `kind` on `stage`."""
    out: dict[int, dict[str, Any]] = {}
    for e in sorted(events, key=lambda e: e["t0"]):
        if e["stage"] == stage and e["kind"] == kind and not e.get("gen") and e.get("mb") is not None:
            out.setdefault(e["mb"], e)
    return out


def early_forward(d: RunData) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """(micro-batch, stage 0's loss and backward of it, stage 1's forward of it) of the first micro-batch whose
    forward on stage 1 started before stage 0 had finished its loss and backward."""
    losses, forwards = _first_actions(d.events, 0, Kind.L), _first_actions(d.events, 1, Kind.F)
    mb = next((m for m in sorted(losses) if m in forwards and forwards[m]["t0"] < losses[m]["t1"]), None)
    assert mb is not None, f"{d.name}: no forward of stage 1 runs under stage 0's loss (not a ZeroLock recording?)"
    return mb, losses[mb], forwards[mb]


def ahead_ms(loss: dict[str, Any], fwd: dict[str, Any]) -> float:
    """How long before the loss and backward ended the next stage's forward began."""
    return (loss["t1"] - fwd["t0"]) / 1e6


def early_forwarding_view(runs: list[RunData]) -> LessonView:
    """Stage 1's forward of a micro-batch running while stage 0 still computes that micro-batch's loss
    and backward: the evidence that the hidden state left before the backward."""
    d = runs[0]
    origin = training_origin(d.events)
    mb, loss, fwd = early_forward(d)
    end = first_steps_s(d.events, 1, origin_ns=origin)
    fig = stacked_timelines([(d, origin, "<b>ZeroLock</b>")], x_range=(0.0, 1.02 * end), height=300)
    fig.add_shape(_box(to_s(loss["t0"], origin), to_s(loss["t1"], origin), 0))
    fig.add_shape(_box(to_s(fwd["t0"], origin), to_s(fwd["t1"], origin), 1))
    fig.update_xaxes(title_text="seconds from the first action")
    only_in_legend(fig, (Kind.F, Kind.L, Kind.SF, Kind.RF))
    return LessonView(figure=fig, headline=f"Stage 1 started micro-batch {mb}'s forward "
                                           f"**{ahead_ms(loss, fwd):.0f} ms** "
                                           f"before stage 0 had finished its loss and backward of it.")


# ---- 4 · a stage dies -----------------------------------------------------------------------------

FAILURE_LEGEND = (Kind.RESTORE, Kind.REPLAY, Kind.RELINK, "failure")  # F, B, L: the steps before
AROUND_S = 0.25  # the figure shows this much before the kill and after the last recovery's end


def recovery_words(d: RunData) -> tuple[str, str]:
    """("0.80 s", "4"): a run's time from the kill until caught up, and the micro-batches it replayed."""
    r = d.metrics.recovery[0]
    return f"{r['total_s']:.2f} s", str(r["replayed_microbatches"])


def failure_view(runs: list[RunData]) -> LessonView:
    """Both runs on one axis from the instant of their kill: the lanes that stop, and for how long."""
    recs = [d.metrics.recovery[0] for d in runs]
    x_range = (-AROUND_S, max(r["total_s"] for r in recs) + AROUND_S)
    rows = [(d, r["t_fail_ns"], f"<b>{method_label(d.method)}</b> {r['kind']}") for d, r in zip(runs, recs)]
    fig = stacked_timelines(rows, x_range=x_range, height=FIGURE_HEIGHT_PX)
    for row, (d, r) in enumerate(zip(runs, recs), start=1):
        marks, shapes, _ = failure_marks([r], stages=d.stages, origin_ns=r["t_fail_ns"], lo_s=x_range[0],
                                         hi_s=x_range[1], end_ns=r["t_end_ns"])
        for trace in marks:
            trace["showlegend"] = row == 1
            fig.add_trace(trace, row=row, col=1)
        for shape in shapes:
            fig.add_shape(shape, row=row, col=1)
        lanes = (0, d.stages - 1) if r["kind"] == "global" else (r["stage"], r["stage"])
        fig.add_shape(_box(0.0, r["total_s"], lanes[0], last_lane=lanes[1], row=row))
        total, replayed = recovery_words(d)  # inside the outline, past the ✕, where the stage is away
        fig.add_annotation(_note(f"{total} · {replayed} replayed", x=0.0, y=r["stage"], row=row, xanchor="left",
                                 xshift=14))
    fig.update_xaxes(title_text="seconds since the kill", row=len(runs), col=1)
    only_in_legend(fig, FAILURE_LEGEND)
    words = " — ".join(f"{method_label(d.method)} **{recovery_words(d)[0]}**, {recovery_words(d)[1]}"
                       for d in runs)
    return LessonView(figure=fig, headline=f"From the kill until caught up, and the micro-batches replayed: "
                                           f"{words}.")


# ---- 5 · does it learn as well? -------------------------------------------------------------------

def _family(arm: str) -> str:
    """"zerolock a=1 top-lora:10" -> "zerolock a=1 top-lora:last": one bar per objective across K."""
    return re.sub(r":\d+$", ":last", arm)


# the top readout the depth study measured at every K
TOP_ARM = f"zerolock a=1 {DEPTH_READOUT}"
# (arm, label, method whose colour it takes, bar pattern): the top readout is ZeroLock's too, hatched
QUALITY_BARS = (("bp", "backprop", "bp", ""), ("zerolock a=1", "ZeroLock · head (paper)", "zerolock", ""),
                (TOP_ARM, f"ZeroLock · {DEPTH_READOUT}", "zerolock", "/"))
# (what it costs, its name on the figure, how a run of the study measured it)
PRICES = (("seconds per step", "s / step", lambda run: run["seconds_per_step"]),
          ("trainable parameters", "parameters", lambda run: sum(run["trainable_params"])),
          ("activations per micro-batch", "activations", lambda run: max(run["stage_activation_bytes"])))


def accuracy(entry: dict[str, Any] | None) -> dict[str, float] | None:
    return (entry or {}).get("final", {}).get("label_accuracy")


def depth_groups(report: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """K -> {arm family: entry} of the study's topics task, by K."""
    groups = {int(key.rpartition("=")[2]): {_family(arm): e for arm, e in per_k.items()}
              for key, per_k in report["results"].items() if key.startswith("topics")}
    return dict(sorted(groups.items()))


def price_ratios(groups: dict[int, dict[str, Any]]) -> dict[str, dict[int, float]]:
    """measure -> K -> the top readout's mean over seeds ÷ backprop's."""
    out: dict[str, dict[int, float]] = {}
    for name, _, value in PRICES:
        out[name] = {k: statistics.mean(value(r) for r in g[TOP_ARM]["runs"])
                     / statistics.mean(value(r) for r in g["bp"]["runs"]) for k, g in groups.items()
                     if TOP_ARM in g and "bp" in g}
    return out


def deepest(groups: dict[int, dict[str, Any]]) -> tuple[int, dict[str, float], dict[str, float]]:
    """(the deepest K, the frozen head's accuracy there, backprop's): where the head trails most."""
    k = max(groups)
    return k, accuracy(groups[k].get("zerolock a=1")), accuracy(groups[k].get("bp"))


def span_text(values: Iterable[float]) -> str:
    lo, hi = f"{min(values):.1f}", f"{max(values):.1f}"
    return f"{lo}×" if lo == hi else f"{lo}–{hi}×"


def frontier_words(path: Path = FRONTIER) -> str:
    """The frontier on real data at its deepest K (one sentence): the top readout and PipeDream against
    backprop, each with the seeds behind its mean and its price (time per step and activations against
    1F1B's); "" without the file or the rows. The whole frontier is the next step's (frontier_lesson.py)."""
    f = deepest_frontier(path)
    top = f.rows.get(readout_arm_name(DEPTH_READOUT)) if f else None
    if f is None or f.bp is None or top is None:
        return ""
    pd = f.rows.get(PIPEDREAM_ARM)
    words = (f"On {f.task} at K = {f.k} ({top['steps']} steps): `{DEPTH_READOUT}` {top['accuracy_mean']:.3f} "
             f"({seeds_words(top)}) against backprop's {f.bp['accuracy_mean']:.3f}, at "
             + price_words(top, step=" 1F1B's step"))
    if pd:  # the same two prices, in the same order: the words once
        words += f"; PipeDream {pd['accuracy_mean']:.3f} ({seeds_words(pd)}) at {price_words(pd, step='', memory='')}"
    return words + "."


def quality_view(path: Path = DEPTH_STUDY) -> LessonView:
    """Left: the last chunk's label accuracy per K (mean ± sd over seeds), backprop's level dashed and
    outlined. Right: what the top readout costs over backprop, from the lowest to the highest K's."""
    report = json.loads(path.read_text())
    groups = depth_groups(report)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38], horizontal_spacing=0.08)
    ks = list(groups)
    for arm, label, method, pattern in QUALITY_BARS:
        accs = [accuracy(groups[k].get(arm)) for k in ks]
        fig.add_trace(go.Bar(x=[f"K = {k}" for k in ks], y=[a["mean"] if a else None for a in accs], name=label,
                             error_y=dict(type="data", array=[a["sd"] if a else 0 for a in accs], thickness=1.5),
                             marker=dict(color=METHOD_COLOURS[method], pattern=dict(shape=pattern)),
                             # at the bar's foot: the error bar is at its top
                             text=[f"{a['mean']:.3f}" if a else "" for a in accs], textposition="inside",
                             insidetextanchor="start", textangle=-90, textfont=dict(size=BAR_TEXT_PX, color="white"),
                             hovertemplate=f"{label}<br>%{{x}}: %{{y:.3f}}<extra></extra>"), row=1, col=1)
    for i, k in enumerate(ks):
        bp = accuracy(groups[k].get("bp"))
        if bp is not None:
            fig.add_shape(type="line", xref="x", yref="y", x0=i - 0.45, x1=i + 0.45, y0=bp["mean"], y1=bp["mean"],
                          line=dict(color=HIGHLIGHT_COLOUR, width=2.5, dash="dash"), name=HIGHLIGHT)
    # the price: one bar per measure from its lowest to its highest ratio over K, named over its bar
    ratios = price_ratios(groups)
    top = max(max(v.values()) for v in ratios.values())
    for name, short, _ in PRICES:
        values = list(ratios[name].values())
        fig.add_trace(go.Bar(y=[short], x=[max(values) - min(values) or 0.04], base=[min(values)], orientation="h",
                             width=0.25, marker=dict(color=METHOD_COLOURS["zerolock"], pattern=dict(shape="/")),
                             showlegend=False, hovertemplate=f"{name}: %{{base:.2f}}–%{{x:.2f}}<extra></extra>"),
                      row=1, col=2)
        # the measure and its span over its bar, on two lines from the axis' left end: it fits a narrow panel
        fig.add_annotation(text=f"{short}<br><b>{span_text(values)}</b>", x=0, xref="x2", xanchor="left", y=short,
                           yref="y2", yanchor="bottom", yshift=10, align="left", showarrow=False,
                           font=dict(size=BAR_TEXT_PX + 1), bgcolor="rgba(255,255,255,0.85)", name="price-label")
    fig.add_vline(x=1.0, line=dict(color=NEUTRAL["chance"], width=1.5, dash="dash"), row=1, col=2)
    fig.update_xaxes(range=[0, 1.15 * top], title_text="÷ backprop's", row=1, col=2)
    fig.update_yaxes(autorange="reversed", showticklabels=False, row=1, col=2)
    fig.update_yaxes(title_text="label accuracy (last chunk)", range=[0, 1.0], row=1, col=1)
    lesson_frame(fig, height=FIGURE_HEIGHT_PX, left=60)
    fig.update_layout(barmode="group")
    # the headline: where the top readout stands against backprop, and at what price
    measured = [g for g in groups.values() if TOP_ARM in g and "bp" in g]
    assert measured, f"{path.name} has no K with both backprop and {TOP_ARM}"
    level = all(accuracy(g[TOP_ARM])["mean"] + accuracy(g[TOP_ARM])["sd"] >= accuracy(g["bp"])["mean"]
                - accuracy(g["bp"])["sd"] for g in measured)  # within one sd of each other
    deepest_k, head, bp = deepest(groups)
    stands = "holds **backprop's level** at every K" if level else "falls **below backprop's level** at some K"
    # its price over backprop is the right panel's labels: the words do not say it twice
    headline = (f"`{DEPTH_READOUT}` {stands} (K = {ks[0]}–{ks[-1]}), priced on the right; the frozen head "
                f"falls to {head['mean']:.3f} against {bp['mean']:.3f} at K = {deepest_k}.")
    frontier = frontier_words()
    return LessonView(figure=fig, headline=headline + (f"  \n{frontier}" if frontier else ""))


# ---- the step -------------------------------------------------------------------------------------

VIEWS = {"timelines": bubble_view, "memory": memory_view, "early-forwarding": early_forwarding_view,
         "failure": failure_view}
FIGURES = (*VIEWS, "quality", "frontier")


def lesson_view(lesson: Lesson) -> LessonView:
    """The step's figure and headline, from its recordings (the last two steps: the committed results)."""
    if lesson.figure == "quality":
        return quality_view()
    if lesson.figure == "frontier":
        return frontier_view()
    if lesson.figure not in VIEWS:
        raise ValueError(f"lesson {lesson.key!r}: no figure {lesson.figure!r}")
    return VIEWS[lesson.figure](recorded(lesson))


PRESENTER_FONT_PX = 15  # the figures' base font in presenter view (plotly's default is 12)


def present(fig: go.Figure) -> go.Figure:
    """The figure for a projector: larger type, and no height of its own: the page gives it what is left
    of the screen under the step row (`app/tabs/lessons.py`'s presenter CSS), at any zoom."""
    fig.update_layout(font=dict(size=PRESENTER_FONT_PX), height=None, legend_font_size=PRESENTER_FONT_PX - 2)
    fig.update_annotations(font_size=PRESENTER_FONT_PX - 1)
    return fig
