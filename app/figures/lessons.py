"""The figures of the lessons, drawn from the recorded example runs (or, for the last lesson, the
project's committed depth study), with what to look at outlined: every highlight is a shape or an
annotation named `HIGHLIGHT` (the tests and the browser tier find them by that name).

`lesson_figures(lesson)` returns (main figure, second figure or None) and the line of numbers the
narration quotes, all computed from the recordings: nothing here is typed in by hand.
"""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from zerolock_core.viz.palette import HIGHLIGHT_COLOUR, METHOD_COLOURS, method_label
from zerolock_core.runtime.recovery_phases import phases_text
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.vocabulary import BUSY_KINDS, Kind

from .compare import Series, compare_memory_figure, compare_timeline_figure
from .layout import frame
from ..lessons import RECORDINGS, Lesson, recording_name
from ..run_data import RunData, load_run
from .timebase import first_steps_s, time_origin, to_s, training_origin
from .timeline import failure_window, timeline_figure

HIGHLIGHT = "lesson-highlight"
DEPTH_STUDY = Path(__file__).resolve().parents[2] / "docs" / "results" / "depth-study.json"
SHOWN_STEPS = 2  # the schedule lessons open on this many optimizer steps
MAX_GAPS_PER_LANE = 3


def recorded(lesson: Lesson) -> list[RunData]:
    """The lesson's recorded runs, in its order; FileNotFoundError naming the missing one."""
    out = []
    for method in lesson.shown:
        rd = RunDir(RECORDINGS / recording_name(lesson.live, method))
        out.append(load_run(rd, name=rd.name))
    return out


def series_of(runs: list[RunData]) -> list[Series]:
    return [Series(label=d.label, events=d.events, stages=d.stages, method=d.method, metrics=d.metrics)
            for d in runs]


def _box(x0: float, x1: float, lane: int, *, axis: str = "") -> dict[str, Any]:
    return dict(type="rect", xref=f"x{axis}", yref=f"y{axis}", x0=round(x0, 6), x1=round(x1, 6), y0=lane - 0.48,
                y1=lane + 0.48, line=dict(color=HIGHLIGHT_COLOUR, width=2.5), fillcolor="rgba(0,0,0,0)",
                layer="above", name=HIGHLIGHT)


def _note(text: str, *, x: float, y: float, xref: str = "paper", yref: str = "paper", **kw) -> dict[str, Any]:
    return dict(text=text, x=x, y=y, xref=xref, yref=yref, showarrow=False, name=HIGHLIGHT,
                font=dict(size=13, color=HIGHLIGHT_COLOUR), bgcolor="rgba(255,255,255,0.9)", **kw)


def idle_gaps(events: list[dict[str, Any]], *, stage: int, until_s: float, origin_ns: int,
              min_s: float) -> list[tuple[float, float]]:
    """(start s, end s) of the stretches where `stage` computes nothing, between the pipeline's first
    action (time 0 at `origin_ns`) and `until_s`, at least `min_s` long: the bubble, as the lane shows it."""
    busy = sorted((to_s(e["t0"], origin_ns), to_s(e["t1"], origin_ns)) for e in events
                  if e["stage"] == stage and e["kind"] in BUSY_KINDS)
    gaps, reach = [], 0.0  # from the pipeline's first action: a later stage's wait for its first input counts
    for t0, t1 in busy:
        if t0 > until_s:
            break
        if t0 - reach >= min_s:
            gaps.append((reach, t0))
        reach = max(reach, t1)
    return gaps


def bubble_figure(runs: list[RunData]) -> tuple[go.Figure, str]:
    series = series_of(runs)
    fig = compare_timeline_figure(series, title="The first steps of each schedule, on one time axis",
                                  initial_steps=SHOWN_STEPS, predicted=False)
    words = []
    for row, d in enumerate(runs, start=1):
        origin = training_origin(d.events)
        until = first_steps_s(d.events, SHOWN_STEPS, origin_ns=origin) or to_s(max(e["t1"] for e in d.events), origin)
        idle = 0.0
        for stage in range(d.stages):
            gaps = idle_gaps(d.events, stage=stage, until_s=until, origin_ns=origin, min_s=0.02 * until)
            idle += sum(b - a for a, b in gaps)
            for a, b in sorted(gaps, key=lambda g: g[0] - g[1])[:MAX_GAPS_PER_LANE]:
                fig.add_shape(_box(a, b, stage, axis="" if row == 1 else str(row)))
        words.append(f"{method_label(d.method)} {100 * idle / (d.stages * until):.0f} %")
    return fig, "idle within the first two steps (outlined): " + ", ".join(words)


def memory_lesson_figure(runs: list[RunData]) -> tuple[go.Figure, str]:
    fig = compare_memory_figure(series_of(runs), title="Activation memory per stage, measured")
    peaks = {method_label(d.method): max(p.get("peak_activation_bytes", 0) for p in d.metrics.per_stage) / 2**20
             for d in runs}
    fig.add_shape(type="rect", xref="x2 domain", yref="y2 domain", x0=-0.02, x1=1.02, y0=-0.02, y1=1.02,
                  line=dict(color=HIGHLIGHT_COLOUR, width=2.5), fillcolor="rgba(0,0,0,0)", name=HIGHLIGHT)
    words = ", ".join(f"{name} {mib:.1f} MiB" for name, mib in peaks.items())
    most, least = max(peaks, key=peaks.get), min(peaks, key=peaks.get)
    ratio = f"{least} holds {peaks[most] / peaks[least]:.1f}× less than {most}"
    return fig, f"peak activations of the largest stage: {words}; {ratio}"


def early_forwarding_figure(runs: list[RunData]) -> tuple[go.Figure, str]:
    d = runs[0]
    origin = time_origin(d.events)
    by = {(e["kind"], e["mb"]): e for e in d.events if e["stage"] == 0 and e.get("gen", 0) == 0}
    mb = next(m for (k, m) in sorted(by, key=lambda x: (x[1] is None, x[1] or 0)) if k == Kind.SF
              and (Kind.L, m) in by and by[(Kind.SF, m)]["t1"] <= by[(Kind.L, m)]["t0"])
    sf, loss = by[(Kind.SF, mb)], by[(Kind.L, mb)]
    end = first_steps_s(d.events, 1, origin_ns=origin)
    fig = timeline_figure(d.events, stages=d.stages, title="ZeroLock: each stage forwards, sends on, then trains",
                          x_range=(to_s(training_origin(d.events), origin), end), rangeslider=False)
    fig.add_shape(_box(to_s(sf["t0"], origin), to_s(loss["t1"], origin), 0))
    fig.add_annotation(_note(f"SF{mb} leaves before L{mb}", x=to_s(sf["t0"], origin), y=-0.5, xref="x", yref="y",
                             xanchor="left", yanchor="bottom"))
    ahead_ms = (loss["t1"] - sf["t1"]) / 1e6
    return fig, f"stage 0 sent micro-batch {mb} on {ahead_ms:.0f} ms before its own loss and backward ended"


def failure_figure(d: RunData) -> go.Figure:
    recs = d.metrics.recovery
    window = failure_window([*d.events], recs, before_s=0.5, after_s=0.5)
    fig = timeline_figure(d.events, stages=d.stages, recoveries=recs, x_range=window, rangeslider=False,
                          title=f"{method_label(d.method)}: stage {recs[0]['stage']} killed")
    origin = time_origin(d.events)
    for r in recs:
        lanes = range(d.stages) if r["kind"] == "global" else [r["stage"]]
        for lane in lanes:
            fig.add_shape(_box(to_s(r["t_fail_ns"], origin), to_s(r["t_end_ns"], origin), lane))
    return fig


def failure_figures(runs: list[RunData]) -> tuple[go.Figure, go.Figure, str]:
    words = [f"{method_label(d.method)} ({r['kind']}): {phases_text(r)}"
             for d in runs for r in d.metrics.recovery]
    return failure_figure(runs[0]), failure_figure(runs[1]), "; ".join(words)


def _family(arm: str) -> str:
    """"zerolock a=1 top-lora:10" -> "zerolock a=1 top-lora:last": one bar per objective across K."""
    return re.sub(r":\d+$", ":last", arm)


# (arm, label, method whose colour it takes, bar pattern): top-lora is ZeroLock's too, hatched
QUALITY_BARS = (("bp", "backprop", "bp", ""), ("zerolock a=1", "local, frozen head (paper)", "zerolock", ""),
                ("terminal", "last chunk only", "terminal", ""),
                ("zerolock a=1 top-lora:last", "local, top-lora:last", "zerolock", "/"))


def quality_figure(path: Path = DEPTH_STUDY) -> tuple[go.Figure, str]:
    """Final label accuracy per K and objective from the committed depth study (mean ± sd over seeds),
    backprop's level outlined in each group."""
    report = json.loads(path.read_text())
    groups = {key: {_family(arm): e for arm, e in per_k.items()} for key, per_k in report["results"].items()
              if key.startswith("topics")}
    keys = sorted(groups, key=lambda k: int(k.rpartition("=")[2]))
    fig = go.Figure()
    for arm, label, method, pattern in QUALITY_BARS:
        accs = [groups[k].get(arm, {}).get("final", {}).get("label_accuracy") for k in keys]
        fig.add_trace(go.Bar(x=[k.replace("topics ", "") for k in keys], y=[a["mean"] if a else None for a in accs],
                             error_y=dict(type="data", array=[a["sd"] if a else 0 for a in accs]), name=label,
                             marker=dict(color=METHOD_COLOURS[method], pattern=dict(shape=pattern)),
                             text=[f"{a['mean']:.2f}" if a else "" for a in accs], textposition="inside"))
    words = []
    for i, k in enumerate(keys):
        bp = groups[k].get("bp", {}).get("final", {}).get("label_accuracy")
        if bp is None:
            continue
        fig.add_shape(type="line", xref="x", yref="y", x0=i - 0.45, x1=i + 0.45, y0=bp["mean"], y1=bp["mean"],
                      line=dict(color=HIGHLIGHT_COLOUR, width=2.5, dash="dash"), name=HIGHLIGHT)
        head = groups[k].get("zerolock a=1", {}).get("final", {}).get("label_accuracy")
        top = groups[k].get("zerolock a=1 top-lora:last", {}).get("final", {}).get("label_accuracy")
        words.append(f"{k.replace('topics ', '')}: backprop {bp['mean']:.2f}, frozen head "
                     f"{head['mean']:.2f}" + (f", top-lora:last {top['mean']:.2f}" if top else "") if head else "")
    c = report["config"]
    fig.update_yaxes(title_text="label accuracy (last chunk)", range=[0, 1.05])
    fig.update_xaxes(title_text="number of chunks K")
    frame(fig, title=f"{report['settings']['model']} on topics, {c['steps']} steps: the depth study "
                     "(- - backprop's level)", height=420)
    fig.update_layout(barmode="group")
    return fig, "; ".join(w for w in words if w)


def lesson_figures(lesson: Lesson) -> tuple[go.Figure, go.Figure | None, str]:
    """(main figure, second figure or None, the numbers the figure shows in one line)."""
    if lesson.figure == "quality":
        fig, words = quality_figure()
        return fig, None, words
    runs = recorded(lesson)
    if lesson.figure == "timelines":
        fig, words = bubble_figure(runs)
    elif lesson.figure == "memory":
        fig, words = memory_lesson_figure(runs)
    elif lesson.figure == "early-forwarding":
        fig, words = early_forwarding_figure(runs)
    elif lesson.figure == "failure":
        main, second, words = failure_figures(runs)
        return main, second, words
    else:
        raise ValueError(f"lesson {lesson.key!r}: no figure {lesson.figure!r}")
    return fig, None, words


FIGURES = ("timelines", "memory", "early-forwarding", "failure", "quality")
PRESENTER_FONT_PX = 16  # the figures' base font in presenter view (plotly's default is 12)
PRESENTER_HEIGHT_PX = 480  # what is left of a 1280x720 screen under the toggle, the tabs and the step row


def present(fig: go.Figure, *, share: int = 1) -> go.Figure:
    """The figure for a projector: larger type, and at most its `share` of a screen's height left under
    the step row (two figures: half each)."""
    height = PRESENTER_HEIGHT_PX // share
    fig.update_layout(font=dict(size=PRESENTER_FONT_PX), height=min(fig.layout.height or height, height))
    fig.update_annotations(font_size=PRESENTER_FONT_PX - 1)
    return fig
