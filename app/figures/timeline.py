"""Per-stage timeline lanes (Gantt): one lane per stage, stage 0 on top, a bar per action.

Bars are `go.Bar(base=start, x=duration, orientation="h")`, one trace per action kind. Past
`WEBGL_THRESHOLD` bars the SVG bars get slow in the browser, so each kind becomes one `Scattergl`
trace of thick line segments instead (same colours, same lanes).

The x axis is in **seconds since the run started** (its earliest event: a STARTUP span when
start-ups are recorded). What the figure draws besides the actions:

* STARTUP spans (one per stage per process generation), hatched and labelled "start-up" (or
  "restart" for a later generation), with the start-up's phases in the tooltip;
* the failure story from the recovery records: a ✕ "kill" marker on the failed lane at the instant
  of the failure, a translucent band from the failure to the replacement's restore (or to the
  figure's end while it is open) labelled with the record's detect and restart phases — on every
  lane, labelled "global rollback", when every stage rolls back — and the RESTORE / REPLAY bars
  widened to at least `MIN_RECOVERY_PX` pixels at the default width (their tooltip keeps the true
  duration) and labelled with the same record's restore and replay phases (`recovery_phases`);
* a straggler (`--fail S@N:slow=X`): its lane shaded, edged dashed, from the instant it turned slow,
  labelled with its factor;
* optimizer step boundaries (a thin dotted line where each STEP ends, per lane) and, over the plot,
  the step numbers;
* micro-batch numbers on the bars ("F3", "L3", "B3") when at most `LABEL_MAX_BARS` bars are drawn,
  on the bars at least `LABEL_MIN_PX` wide at the default width (the Watch tab's recent window and
  failure window are drawn zoomed in, so their bars are numbered);
* a range slider under the axis (SVG bars only) and `uirevision`, so a zoom survives redraws.

The legend lists only what is drawn: a kind with no bar, or whose bars are too thin to see at the
default width (none `LEGEND_MIN_PX` wide and all of them together under `LEGEND_TOTAL_PX`: sends on
a fast link, a 0-cost STEP), stays out of it.

Long runs are drawn per step instead (step_view.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go

from .layout import fast_figure
from zerolock_core.viz.palette import (THICK_KINDS, FAILURE_COLOURS, NEUTRAL, ALWAYS_VISIBLE_KINDS, kind_colour, kind_label,
                                   kind_sort_key)
from zerolock_core.runtime.recovery_phases import absence_end_ns, phase_seconds, seconds_text
from zerolock_core.vocabulary import Kind, failure_word
from .timebase import Events, recent, time_end, time_origin, to_ms, to_s

WEBGL_THRESHOLD = 3000  # bars per figure
OUTLINE_MAX_BARS = 200  # past this, bars lose their white edges (stroking every bar costs the browser)
LANE_HEIGHT_PX = 46
COMPUTE_WIDTH, COMM_WIDTH = 0.8, 0.45  # bar thickness in lanes: waits and sends drawn thinner
DEFAULT_WIDTH_PX = 700  # plotly's default figure width; a wider page only makes the bars wider
PLOT_MARGIN_PX = 90  # frame_layout's left + right margins
MIN_RECOVERY_PX = 6  # RESTORE / REPLAY bars are at least this wide at DEFAULT_WIDTH_PX
LEGEND_MIN_PX = 1.5  # a kind is in the legend if one of its bars is this wide at the default width,
LEGEND_TOTAL_PX = 4.0  # or its bars together are this wide (a dense run of thin bars shows its colour)
LABEL_MAX_BARS = 400  # micro-batch numbers on the bars up to this many bars (the live window: ~300),
LABEL_MIN_PX = 16  # on those at least this wide at the default width
STEP_LINES_MAX = 2000  # step boundary lines up to this many STEP actions in view
STEP_LABELS_MAX = 24  # step numbers over the plot: at most this many (every n-th step past it)
X_TITLE = "seconds since the run started (start-up included)"
LABELLED_KINDS = frozenset({Kind.F, Kind.L, Kind.B, Kind.W, Kind.REPLAY})  # kinds whose bars carry "F3"


@dataclass(kw_only=True)
class KindLane:
    """All bars of one action kind: parallel lists (one entry per bar). Times in ms from the origin."""
    kind: str
    stage: list[int] = field(default_factory=list)
    start_ms: list[float] = field(default_factory=list)
    dur_ms: list[float] = field(default_factory=list)
    mb: list[int | None] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)  # bytes sent + received by the action
    gen: list[int] = field(default_factory=list)  # process generation
    phases: list[dict[str, Any] | None] = field(default_factory=list)  # STARTUP only: {phase: [t0, t1]}
    # the model chunk of a bar where a lane (a device) runs several (DualPipe-V, simulated); else None
    chunk: list[int | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.stage)


def lane_bars(events: Events, *, stages: int, origin_ns: int) -> list[KindLane]:
    """Group events into bars per kind, in legend order; events of stages >= `stages` are errors."""
    lanes: dict[str, KindLane] = {}
    for e in events:
        s = e["stage"]
        if not 0 <= s < stages:
            raise ValueError(f"event of stage {s} in a {stages}-stage timeline: {e}")
        lane = lanes.setdefault(e["kind"], KindLane(kind=e["kind"]))
        lane.stage.append(s)
        lane.start_ms.append(to_ms(e["t0"], origin_ns))
        lane.dur_ms.append(max(0.0, (e["t1"] - e["t0"]) / 1e6))
        lane.mb.append(e.get("mb"))
        lane.nbytes.append((e.get("sent") or 0) + (e.get("recv") or 0))
        lane.gen.append(e.get("gen") or 0)
        lane.phases.append(e.get("phases"))
        lane.chunk.append(e.get("chunk"))
    return [lanes[k] for k in sorted(lanes, key=kind_sort_key)]


def plot_width_px(width: int | None = None) -> int:
    """Pixels of the plot area of a timeline `width` pixels wide (default DEFAULT_WIDTH_PX)."""
    return max(100, (width or DEFAULT_WIDTH_PX) - PLOT_MARGIN_PX)


def min_width_s(view_span_s: float, *, px: float = MIN_RECOVERY_PX, width: int | None = None) -> float:
    """The x span (s) that is `px` pixels wide when `view_span_s` seconds fill the plot area."""
    return px * max(view_span_s, 1e-9) / plot_width_px(width)


def duration_text(ms: float) -> str:
    """A tooltip's duration: always in ms, with seconds beside it from one second on."""
    return f"{ms:.2f} ms" if ms < 1000 else f"{ms:,.0f} ms ({ms / 1e3:.2f} s)"


def _what(lane: KindLane, i: int) -> str:
    s, mb = lane.stage[i], lane.mb[i]
    if lane.kind == Kind.STARTUP:
        return f"stage {s} · start-up" if not lane.gen[i] else f"stage {s} · restart (process {lane.gen[i]})"
    return f"stage {s} · {lane.kind}{'' if mb is None else mb}"


def _phases_text(phases: dict[str, Any] | None) -> str:
    if not phases:
        return ""
    return " · ".join(f"{name} {(t1 - t0) / 1e9:.1f} s" for name, (t0, t1) in phases.items())


def _drawn_widths(lane: KindLane, min_w_s: float) -> np.ndarray:
    dur = np.asarray(lane.dur_ms) / 1e3
    if lane.kind in ALWAYS_VISIBLE_KINDS and min_w_s > 0:
        dur = np.maximum(dur, np.ceil(min_w_s * 1e6) / 1e6)  # rounded up: the JSON keeps µs
    return dur


def _bar_trace(lane: KindLane, *, showlegend: bool, outline: bool, min_w_s: float = 0.0,
               labels: bool = False, label_min_s: float = 0.0) -> dict[str, Any]:
    start = np.round(np.asarray(lane.start_ms) / 1e3, 6)  # µs precision keeps the JSON small
    drawn = np.round(_drawn_widths(lane, min_w_s), 6)
    if lane.kind == Kind.STARTUP:  # a few spans: text columns (what, duration, phases)
        custom: Any = [[_what(lane, i), duration_text(d), _phases_text(p)]
                       for i, (d, p) in enumerate(zip(lane.dur_ms, lane.phases))]
        hover = "%{customdata[0]}<br>start %{base:.3f} s · duration %{customdata[1]}"
        if any(lane.phases):
            hover += "<br>%{customdata[2]}"
    else:  # numbers only (one typed array): stage, micro-batch, true duration (ms), bytes[, chunk where placed]
        chunked = any(c is not None for c in lane.chunk)
        columns = [lane.stage, [-1 if mb is None else mb for mb in lane.mb], np.round(np.asarray(lane.dur_ms), 3),
                   lane.nbytes] + ([[-1 if c is None else c for c in lane.chunk]] if chunked else [])
        custom = np.column_stack(columns).astype(np.float32)
        what = f"{lane.kind}%{{customdata[1]}}" if any(mb is not None for mb in lane.mb) else lane.kind
        where = "device %{customdata[0]} · chunk %{customdata[4]}" if chunked else "stage %{customdata[0]}"
        hover = (f"{where} · {what}<br>"
                 "start %{base:.3f} s · duration %{customdata[2]:,.2f} ms")
        if any(lane.nbytes):
            way = "sent" if lane.kind.startswith("S") else "received" if lane.kind.startswith("R") else "moved"
            hover += f"<br>%{{customdata[3]:,.0f}} bytes {way}"
    trace = dict(
        type="bar", base=start, x=drawn, y=np.asarray(lane.stage), orientation="h",
        width=COMPUTE_WIDTH if lane.kind in THICK_KINDS or lane.kind == Kind.STARTUP else COMM_WIDTH,
        name=kind_label(lane.kind), legendgroup=lane.kind, showlegend=showlegend,
        # a thin white edge keeps back-to-back bars of one kind apart (F0 F1 F2 in GPipe)
        marker=dict(color=kind_colour(lane.kind), line=dict(color="white", width=1 if outline else 0)),
        customdata=custom, hovertemplate=hover + "<extra></extra>")
    if lane.kind == Kind.STARTUP:
        trace["marker"]["pattern"] = dict(shape="/", fillmode="overlay", fgcolor="white", fgopacity=0.9, size=8,
                                          solidity=0.3)
    if labels and lane.kind in LABELLED_KINDS and any(mb is not None for mb in lane.mb):
        # only on bars wide enough to read it at the default width (plotly would shrink it to a smudge)
        code = "R" if lane.kind == Kind.REPLAY else lane.kind
        # a device's two chunks: the action's own string, "3F0" (chunk 3's forward of micro-batch 0)
        trace.update(text=[f"{'' if c is None else c}{code}{mb}" if mb is not None and w >= label_min_s else ""
                           for mb, w, c in zip(lane.mb, drawn, lane.chunk)],
                     textposition="inside", insidetextanchor="middle", textangle=0,
                     textfont=dict(size=10, color="white"))
    return trace


def _segment_trace(lane: KindLane, *, showlegend: bool, min_w_s: float = 0.0) -> dict[str, Any]:
    xs: list[float | None] = []
    ys: list[int | None] = []
    for s, t, d in zip(lane.stage, lane.start_ms, _drawn_widths(lane, min_w_s)):
        t = t / 1e3
        xs += [round(t, 6), round(t + float(d), 6), None]
        ys += [s, s, None]
    thick = max(2.0, LANE_HEIGHT_PX * (0.6 if lane.kind in THICK_KINDS else 0.3))
    return dict(type="scattergl", x=xs, y=ys, mode="lines", line=dict(color=kind_colour(lane.kind), width=thick),
                name=kind_label(lane.kind), legendgroup=lane.kind, showlegend=showlegend, hoverinfo="skip")


def _extent_s(events: Events, origin_ns: int) -> tuple[float, float]:
    if not events:
        return 0.0, 1.0
    return to_s(time_origin(events), origin_ns), to_s(time_end(events), origin_ns)


def _autorange_span(events: Events, origin_ns: int, lo: float, hi: float, width: int | None) -> float:
    """The span plotly's autorange will show: the events' extent, stretched by RESTORE / REPLAY bars
    that their minimum width pushes past the end (a few rounds reach the fixed point)."""
    ends = [(to_s(e["t0"], origin_ns), (e["t1"] - e["t0"]) / 1e9) for e in events if e["kind"] in ALWAYS_VISIBLE_KINDS]
    span = hi - lo
    for _ in range(3):
        w = min_width_s(span, width=width)
        span = max([hi] + [t + max(d, w) for t, d in ends]) - lo
    return span


def timeline_traces(events: Events, *, stages: int, origin_ns: int, webgl: bool, outline: bool | None = None,
                    legend_seen: set[str] | None = None, view_span_s: float | None = None,
                    width: int | None = None, labels: bool | None = None,
                    view_range_s: tuple[float, float] | None = None) -> list[dict[str, Any]]:
    """One trace (a dict) per action kind, recovery kinds last (on top).

    outline: white bar edges (default: up to OUTLINE_MAX_BARS bars).
    legend_seen: makes a kind appear in the legend once across subplots.
    view_span_s: seconds the plot area shows (default: the events' extent); sets the minimum width
      of RESTORE / REPLAY bars and which kinds are wide enough for the legend.
    width: the figure's width in px (default DEFAULT_WIDTH_PX) for the same two.
    labels: micro-batch numbers on the bars (default: up to LABEL_MAX_BARS bars).
    view_range_s: (x0, x1) shown: only the bars inside it count for the legend."""
    seen = legend_seen if legend_seen is not None else set()
    outline = len(events) <= OUTLINE_MAX_BARS if outline is None else outline
    labels = len(events) <= LABEL_MAX_BARS if labels is None else labels
    if view_span_s is None:
        lo, hi = _extent_s(events, origin_ns)
        view_span_s = hi - lo
    min_w = min_width_s(view_span_s, width=width)
    px_per_s = plot_width_px(width) / max(view_span_s, 1e-9)
    lanes = lane_bars(events, stages=stages, origin_ns=origin_ns)
    lanes.sort(key=lambda lane: lane.kind in ALWAYS_VISIBLE_KINDS)  # stable: recovery bars drawn last, on top
    traces = []
    for lane in lanes:
        widths = _drawn_widths(lane, min_w) * px_per_s if len(lane) else np.zeros(1)
        if view_range_s is not None and len(lane):
            t0 = np.asarray(lane.start_ms) / 1e3
            inside = (t0 < view_range_s[1]) & (t0 + widths / px_per_s > view_range_s[0])
            widths = widths[inside] if inside.any() else np.zeros(1)
        # seen on screen: one bar wide enough, or many thin ones that together make a visible band
        visible = float(np.max(widths)) >= LEGEND_MIN_PX or float(np.sum(widths)) >= LEGEND_TOTAL_PX
        show = visible and lane.kind not in seen
        if show:
            seen.add(lane.kind)
        traces.append(_segment_trace(lane, showlegend=show, min_w_s=min_w) if webgl
                      else _bar_trace(lane, showlegend=show, outline=outline, min_w_s=min_w, labels=labels,
                                      label_min_s=min_width_s(view_span_s, px=LABEL_MIN_PX, width=width)))
    return traces


def step_line_trace(events: Events, *, origin_ns: int, showlegend: bool = True) -> dict[str, Any] | None:
    """Thin dotted vertical lines on each lane where a STEP ends (None: no STEP, or too many)."""
    ends = [(e["stage"], to_s(e["t1"], origin_ns)) for e in events if e["kind"] == Kind.STEP]
    if not ends or len(ends) > STEP_LINES_MAX:
        return None
    xs: list[float | None] = []
    ys: list[float | None] = []
    for s, t in ends:
        xs += [round(t, 6), round(t, 6), None]
        ys += [s - 0.48, s + 0.48, None]
    return dict(type="scatter", x=xs, y=ys, mode="lines", line=dict(color=NEUTRAL["step"], width=1, dash="dot"),
                name="optimizer step ends", legendgroup="step-boundary", showlegend=showlegend, hoverinfo="skip")


def step_label_annotations(events: Events, *, origin_ns: int, xref: str = "x", view_span_s: float | None = None,
                           width: int | None = None) -> list[dict[str, Any]]:
    """Step numbers over the plot, at the end of each STEP of the first stage that steps: at most
    STEP_LABELS_MAX, none closer than about 28 px to the previous one at the default width."""
    steps = [e for e in events if e["kind"] == Kind.STEP]
    if not steps:
        return []
    first = min(e["stage"] for e in steps)
    ends = sorted((to_s(e["t1"], origin_ns), e.get("step", 0)) for e in steps if e["stage"] == first)
    span = view_span_s if view_span_s is not None else ends[-1][0] - ends[0][0]
    gap = max(min_width_s(span, px=28, width=width), span / STEP_LABELS_MAX)
    kept: list[tuple[float, int]] = []
    for t, n in ends:
        if not kept or t - kept[-1][0] >= gap:
            kept.append((t, n))
    return [dict(text=f"step {n}" if i == 0 else str(n), x=round(t, 6), xref=xref, y=1.0,
                 yref="paper", yanchor="bottom", xanchor="center", showarrow=False,
                 font=dict(size=9, color=NEUTRAL["muted"]))
            for i, (t, n) in enumerate(kept)]


def _clusters(lane: KindLane, gap_ms: float) -> list[tuple[int, float, float, int, int]]:
    """Runs of back-to-back bars of one process on one stage: (stage, start ms, end ms, bars, generation)."""
    out: list[list[Any]] = []
    for s, t, d, g in sorted(zip(lane.stage, lane.start_ms, lane.dur_ms, lane.gen)):
        if out and out[-1][0] == s and out[-1][4] == g and t <= out[-1][2] + gap_ms:
            out[-1][2] = max(out[-1][2], t + d)
            out[-1][3] += 1
        else:
            out.append([s, t, t + d, 1, g])
    return [tuple(c) for c in out]  # type: ignore[misc]


def _bar_label(kind: str, n: int, t0_ms: float, t1_ms: float, record: dict[str, Any] | None) -> str:
    """RESTORE's bar is the restore phase (the same instants); REPLAY's bars are the replay phase's work,
    not its span (which also waits for inputs), so their label gives the record's phase beside them."""
    count = f" ×{n}" if n > 1 else ""
    if kind == Kind.RESTORE:
        return f"{kind}{count} · {seconds_text((t1_ms - t0_ms) / 1e3)}"
    if record is not None and "replay" in dict(phase_seconds(record)):
        return f"{kind}{count} · replay {seconds_text(record['replay_s'])}"
    return f"{kind}{count}"


def recovery_bar_annotations(events: Events, *, stages: int, origin_ns: int, view_span_s: float,
                             width: int | None = None, limit: int = 24, right_edge_s: float | None = None,
                             recoveries: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """A label over each run of RESTORE / REPLAY bars ("RESTORE · 3.4 ms", "REPLAY ×4 · replay 84 ms", the
    numbers of the recovery record, `recovery_phases`): RESTORE's up to the left, REPLAY's up to the right
    (also to the left, higher, within about 150 px of `right_edge_s`, so it stays on the plot)."""
    gap_ms = 1e3 * min_width_s(view_span_s, px=2 * MIN_RECOVERY_PX, width=width)
    room_s = min_width_s(view_span_s, px=150, width=width)
    by_process = {(r.get("stage"), r.get("gen")): r for r in recoveries if r.get("gen") is not None}
    out = []
    for lane in lane_bars([e for e in events if e["kind"] in ALWAYS_VISIBLE_KINDS], stages=stages, origin_ns=origin_ns):
        for s, t0, t1, n, gen in _clusters(lane, gap_ms)[-limit:]:
            left = lane.kind == Kind.RESTORE or (right_edge_s is not None and t0 / 1e3 > right_edge_s - room_s)
            out.append(dict(text=_bar_label(lane.kind, n, t0, t1, by_process.get((s, gen))),
                            x=round(t0 / 1e3, 6), y=s, xref="x", yref="y", showarrow=True, arrowhead=0,
                            arrowwidth=1, arrowcolor=kind_colour(lane.kind), ax=-28 if left else 28,
                            ay=-34 if left and lane.kind != Kind.RESTORE else -20, xanchor="right" if left else "left",
                            font=dict(size=10, color=kind_colour(lane.kind)), bgcolor="rgba(255,255,255,0.85)",
                            name=f"{lane.kind}-label"))
    return out


def startup_annotations(events: Events, *, origin_ns: int, limit: int = 40) -> list[dict[str, Any]]:
    """"start-up" (first process) or "restart" (a later one) in the middle of each STARTUP span."""
    spans = [e for e in events if e["kind"] == Kind.STARTUP][-limit:]
    return [dict(text="start-up" if not e.get("gen") else "restart", x=round(to_s((e["t0"] + e["t1"]) // 2,
                                                                                  origin_ns), 6),
                 y=e["stage"], xref="x", yref="y", showarrow=False, font=dict(size=10, color=NEUTRAL["ink"]))
            for e in spans]


def band_label(r: dict[str, Any], end_ns: int) -> str:
    """What the band says: the record's own phases (`recovery_phases`), or how long so far."""
    head = "global rollback" if r.get("kind") == "global" else None
    done = absence_end_ns(r)
    if done is None or r.get("open"):
        so_far = max(0, end_ns - r["t_fail_ns"]) / 1e9
        return f"{head or 'down'} … {so_far:.1f} s so far"
    phases = dict(phase_seconds(r))
    if "restart" in phases:
        words = f"detect {seconds_text(phases['detect'])} · restart {seconds_text(phases['restart'])}"
    else:
        words = f"detect + restart + restore · {seconds_text(max(0, done - r['t_fail_ns']) / 1e9)}"
    return f"{head} · {words}" if head else words


def failure_marks(recoveries: Sequence[dict[str, Any]], *, stages: int, origin_ns: int, lo_s: float, hi_s: float,
                  end_ns: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(traces, shapes, annotations) of the failure story inside [lo_s, hi_s]: a ✕ on the failed lane
    at the failure, and a band from the failure to the restored stage (to `end_ns` while open), on
    every lane for a global rollback, each band labelled at its bottom left (an annotation, so that the
    restart's bars do not cover it; the RESTORE / REPLAY labels sit above the lane's middle).
    Records without `t_fail_ns` (older runs) are skipped."""
    xs, ys, texts, hovers, shapes, notes = [], [], [], [], [], []
    for r in recoveries:
        if r.get("t_fail_ns") is None or not 0 <= r.get("stage", -1) < stages:
            continue
        t_fail = to_s(r["t_fail_ns"], origin_ns)
        done = absence_end_ns(r)
        t_band = to_s(done if done is not None else max(end_ns, r["t_fail_ns"]), origin_ns)
        if t_band < lo_s or t_fail > hi_s:
            continue
        glob = r.get("kind") == "global"
        still = done is None or bool(r.get("open"))
        label = band_label(r, end_ns)
        for lane in range(stages) if glob else [r["stage"]]:
            x0 = round(max(t_fail, lo_s), 6)
            shapes.append(dict(type="rect", xref="x", yref="y", x0=x0, x1=round(min(t_band, hi_s), 6),
                               y0=lane - 0.5, y1=lane + 0.5, layer="below", fillcolor=FAILURE_COLOURS["band"],
                               line=dict(color=FAILURE_COLOURS["band_edge"], width=1), name="failure-band"))
            notes.append(dict(text=label, x=x0, y=lane + 0.5, xref="x", yref="y", xanchor="left", yanchor="bottom",
                              showarrow=False, xshift=10, yshift=1, bgcolor="rgba(255,255,255,0.8)",
                              font=dict(size=10, color=FAILURE_COLOURS["kill"]), name="failure-band-label"))
        if r.get("t_detect_ns") is not None and lo_s <= to_s(r["t_detect_ns"], origin_ns) <= hi_s:
            t_det = round(to_s(r["t_detect_ns"], origin_ns), 6)
            shapes.append(dict(type="line", xref="x", yref="y", x0=t_det, x1=t_det, y0=r["stage"] - 0.5,
                               y1=r["stage"] + 0.5, line=dict(color=FAILURE_COLOURS["kill"], width=1, dash="dot"),
                               name="failure-detected"))
        if lo_s <= t_fail <= hi_s:
            xs.append(round(t_fail, 6))
            ys.append(r["stage"])
            word = failure_word(r.get("mode"))
            texts.append(word)
            parts = [f"stage {r['stage']}: {word} at {t_fail:.2f} s",
                     f"{'global rollback (every stage)' if glob else 'local restart (this stage only)'}"]
            parts += [f"{name} {seconds_text(sec)}" for name, sec in phase_seconds(r)]
            if still:
                parts.append(f"under way: {max(0, end_ns - r['t_fail_ns']) / 1e9:.1f} s so far")
            hovers.append("<br>".join(parts))
    traces = []
    if xs:
        notes += [dict(text=word, x=x, y=y, xref="x", yref="y", xanchor="right", xshift=-9, showarrow=False,
                       bgcolor="rgba(255,255,255,0.85)", font=dict(size=11, color=FAILURE_COLOURS["kill"]),
                       name="failure-label") for x, y, word in zip(xs, ys, texts)]
        traces.append(dict(type="scatter", x=xs, y=ys, mode="markers", text=texts, cliponaxis=False,
                           marker=dict(symbol="x", size=15, color=FAILURE_COLOURS["kill"],
                                       line=dict(color="white", width=1)),
                           name="failure", legendgroup="failure", showlegend=True, hovertext=hovers,
                           hoverinfo="text"))
    return traces, shapes, notes


def straggler_marks(stragglers: Sequence[dict[str, Any]], *, stages: int, origin_ns: int, lo_s: float,
                    hi_s: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(shapes, annotations) of the stragglers (metrics.json `stragglers`, `--fail S@N:slow=X`) inside
    [lo_s, hi_s]: the slowed lane shaded from the instant it turned slow to the figure's end, labelled with
    its factor. Nothing failed: no ✕, no recovery (its bars are simply longer from there)."""
    shapes, notes = [], []
    for r in stragglers:
        if r.get("t_fail") is None or not 0 <= r.get("stage", -1) < stages:
            continue
        t0 = to_s(r["t_fail"], origin_ns)
        if t0 > hi_s:
            continue
        x0, lane = round(max(t0, lo_s), 6), r["stage"]
        shapes.append(dict(type="rect", xref="x", yref="y", x0=x0, x1=round(hi_s, 6), y0=lane - 0.5, y1=lane + 0.5,
                           layer="below", fillcolor=FAILURE_COLOURS["slow_band"],
                           line=dict(color=FAILURE_COLOURS["band_edge"], width=1, dash="dash"), name="straggler-band"))
        notes.append(dict(text=f"straggler: {r.get('factor', 0):g}× slower from here", x=x0, y=lane + 0.5, xref="x",
                          yref="y", xanchor="left", yanchor="bottom", showarrow=False, xshift=4, yshift=1,
                          bgcolor="rgba(255,255,255,0.8)", font=dict(size=10, color=FAILURE_COLOURS["kill"]),
                          name="straggler-label"))
    return shapes, notes


def failure_window(events: Events, recoveries: Sequence[dict[str, Any]], *, before_s: float = 5.0,
                   after_s: float = 5.0, origin_ns: int | None = None) -> tuple[float, float] | None:
    """The x range (seconds on `timeline_figure`'s axis, same `origin_ns` default) around the most
    recent failure: from `before_s` before it to `after_s` after the recovery's last known instant
    (caught up, else restored, else detected, else the failure itself). None without a failure
    that has `t_fail_ns`. The Watch tab pins the view to it ("jump to failure")."""
    if before_s < 0 or after_s < 0:
        raise ValueError(f"before_s and after_s must be >= 0 (got {before_s}, {after_s})")
    timed = [r for r in recoveries if r.get("t_fail_ns") is not None]
    if not timed:
        return None
    origin = (time_origin(events) if events else min(r["t_fail_ns"] for r in timed)) if origin_ns is None \
        else origin_ns
    r = max(timed, key=lambda rec: rec["t_fail_ns"])
    last = max(r.get(k) or r["t_fail_ns"] for k in ("t_end_ns", "t_restored_ns", "t_detect_ns"))
    return max(0.0, to_s(r["t_fail_ns"], origin) - before_s), to_s(last, origin) + after_s


def add_timeline_traces(fig: go.Figure, events: Events, *, stages: int, origin_ns: int, webgl: bool,
                        row: int | None = None, col: int | None = None,
                        legend_seen: set[str] | None = None, view_span_s: float | None = None,
                        labels: bool | None = None, step_lines: bool = True) -> None:
    """Add the timeline traces to a subplot of `fig` (Compare and Explain stack several runs; drawn
    once and opened zoomed in, so their bars keep their edges). view_span_s / labels: as in
    `timeline_traces`; step_lines: the dotted step boundaries."""
    seen = legend_seen if legend_seen is not None else set()
    for trace in timeline_traces(events, stages=stages, origin_ns=origin_ns, webgl=webgl, outline=True,
                                 legend_seen=seen, view_span_s=view_span_s, labels=labels):
        fig.add_trace(trace, row=row, col=col)
    steps = step_line_trace(events, origin_ns=origin_ns, showlegend="step-boundary" not in seen) \
        if step_lines else None
    if steps is not None:
        seen.add("step-boundary")
        fig.add_trace(steps, row=row, col=col)


def lane_axis(stages: int) -> dict[str, Any]:
    """Integer lanes labelled `stage s`, stage 0 on top."""
    return dict(tickmode="array", tickvals=list(range(stages)), ticktext=[f"stage {s}" for s in range(stages)],
                range=[stages - 0.5, -0.5], showgrid=False, zeroline=False, fixedrange=True)


def style_lanes(fig: go.Figure, *, stages: int, row: int | None = None, col: int | None = None) -> None:
    fig.update_yaxes(**lane_axis(stages), row=row, col=col)


def _merge_startups(events: Events, startups: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    if not startups:
        return list(events)
    have = {(e["stage"], e.get("gen") or 0) for e in events if e["kind"] == Kind.STARTUP}
    return [*(s for s in startups if (s["stage"], s.get("gen") or 0) not in have), *events]


def timeline_figure(events: list[dict[str, Any]], *, stages: int, title: str = "",
                    window_s: float | None = None, origin_ns: int | None = None,
                    webgl_threshold: int = WEBGL_THRESHOLD, uirevision: str = "timeline",
                    recoveries: Sequence[dict[str, Any]] = (), startups: Sequence[dict[str, Any]] = (),
                    stragglers: Sequence[dict[str, Any]] = (),
                    x_range: tuple[float, float] | None = None, now_ns: int | None = None,
                    width: int | None = None, rangeslider: bool | None = None, step_lines: bool = True,
                    label_max_bars: int = LABEL_MAX_BARS) -> go.Figure:
    """One lane per stage (stage 0 on top), one bar per action, coloured by kind (KIND_COLOURS);
    x in seconds since the run started (see the module docstring for everything drawn).

    window_s: draw only the events that end in the last `window_s` seconds (None = all).
    origin_ns: time zero of the x axis (default: the earliest event given, before windowing,
      STARTUP spans included).
    uirevision: keep the user's zoom across redraws with the same value.
    recoveries: recovery records (metrics.json "recovery" or the live status), drawn as the kill
      marker, the "detect + restart" / "global rollback" band and labelled RESTORE / REPLAY bars.
    startups: STARTUP spans kept outside `events` (lifecycle.jsonl); merged in, those already in
      `events` (same stage and generation) win.
    stragglers: straggler records (metrics.json "stragglers" or the live status): the slowed lane shaded
      from where it turned slow.
    x_range: (x0, x1) in seconds to show (e.g. `failure_window(...)`); default: autorange. It also
      sets the span that the minimum RESTORE / REPLAY width and the legend's visibility test use.
    now_ns: where an open failure band ends (default: the latest event's end).
    width: the figure's width in px (default: responsive; DEFAULT_WIDTH_PX is assumed for widths).
    rangeslider: the range slider under the axis (default: when the bars are SVG, not WebGL).
    step_lines: dotted lines where each STEP ends, and step numbers over the plot.
    label_max_bars: micro-batch numbers on the bars up to this many bars drawn."""
    if stages < 1:
        raise ValueError(f"stages must be at least 1 (got {stages})")
    if x_range is not None and not x_range[1] > x_range[0]:
        raise ValueError(f"x_range must be (x0, x1) with x1 > x0 (got {x_range})")
    events = _merge_startups(events, startups)
    origin = time_origin(events) if origin_ns is None else origin_ns
    shown = recent(events, window_s)
    webgl = len(shown) > webgl_threshold
    lo, hi = _extent_s(shown, origin)
    open_end = max(time_end(shown) if shown else origin, now_ns or 0)
    if any(r.get("t_fail_ns") is not None and r.get("t_restored_ns") is None for r in recoveries):
        hi = max(hi, to_s(open_end, origin))
    view = (x_range[1] - x_range[0]) if x_range is not None else _autorange_span(shown, origin, lo, hi, width)
    traces = timeline_traces(shown, stages=stages, origin_ns=origin, webgl=webgl, view_span_s=view, width=width,
                             labels=len(shown) <= label_max_bars, view_range_s=x_range)
    annotations: list[dict[str, Any]] = []
    shapes: list[dict[str, Any]] = []
    if step_lines and shown:
        steps = step_line_trace(shown, origin_ns=origin)
        if steps is not None:
            traces.insert(0, steps)  # under the bars
            annotations += step_label_annotations(shown, origin_ns=origin, view_span_s=view, width=width)
    if shown:
        annotations += startup_annotations(shown, origin_ns=origin)
        annotations += recovery_bar_annotations(shown, stages=stages, origin_ns=origin, view_span_s=view, width=width,
                                                right_edge_s=x_range[1] if x_range is not None else lo + view,
                                                recoveries=recoveries)
    if recoveries:
        # only failures inside what is drawn: a band outside it would stretch plotly's autorange
        view_lo, view_hi = (min(lo, x_range[0]), max(hi, x_range[1])) if x_range is not None else (lo, hi)
        marks, shapes, notes = failure_marks(recoveries, stages=stages, origin_ns=origin, lo_s=view_lo,
                                             hi_s=view_hi, end_ns=open_end)
        traces += marks
        annotations += notes
    if stragglers and shown:
        view_lo, view_hi = (x_range[0], x_range[1]) if x_range is not None else (lo, hi)
        slow_shapes, slow_notes = straggler_marks(stragglers, stages=stages, origin_ns=origin, lo_s=view_lo,
                                                  hi_s=view_hi)
        shapes += slow_shapes
        annotations += slow_notes
    slider = (not webgl) if rangeslider is None else rangeslider
    xaxis: dict[str, Any] = dict(title=dict(text=X_TITLE), zeroline=False, ticksuffix=" s")
    if x_range is not None:
        xaxis.update(range=[round(x_range[0], 6), round(x_range[1], 6)], autorange=False)
    if slider and shown:
        xaxis["rangeslider"] = dict(visible=True, thickness=0.08, bgcolor=NEUTRAL["panel"], bordercolor=NEUTRAL["idle"],
                                    borderwidth=1)
    layout: dict[str, Any] = dict(yaxis=lane_axis(stages), xaxis=xaxis, barmode="overlay", bargap=0,
                                  shapes=shapes)
    if not shown:
        annotations.append(dict(text="no actions yet", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5))
    layout["annotations"] = annotations
    height = max(230, 140 + LANE_HEIGHT_PX * stages) + (60 if slider and shown else 0)
    fig = fast_figure(traces, layout, title=title, height=height, uirevision=uirevision,
                      subplot_titles=any(a.get("yref") == "paper" and a.get("xref") == "x" for a in annotations))
    if width is not None:
        fig.layout.width = width
    return fig
