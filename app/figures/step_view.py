"""The whole of a long run at a glance: one stacked bar per stage and optimizer step (seconds by
action kind, plus the step's unrecorded time) instead of one bar per action. The Watch tab switches
to it past `AGGREGATE_ABOVE` actions (`should_aggregate`)."""
from __future__ import annotations

from typing import Any, Sequence

import plotly.graph_objects as go

from .layout import fast_figure
from zerolock_core.viz.palette import FAILURE_COLOURS, NEUTRAL, kind_colour, kind_label, kind_sort_key
from zerolock_core.vocabulary import Kind, failure_word
from .timebase import Events
from .timeline import WEBGL_THRESHOLD

# actions: past this, one bar per action would need WebGL and every bar is under a pixel wide, so the
# per-step view reads better (and a software-rendered browser spends ~30 % of a core on the WebGL)
AGGREGATE_ABOVE = WEBGL_THRESHOLD
OUTLIER_FACTOR = 4.0  # per-step view: a step this many times the 90th percentile clips the row's axis


def should_aggregate(events: Events, *, above: int = AGGREGATE_ABOVE) -> bool:
    """Whether a view of `events` should be the per-step aggregate rather than one bar per action."""
    return len(events) > above


def step_of(e: dict[str, Any]) -> int:
    """The 1-based optimizer step an action belongs to: `step` counts the steps done when it ended,
    so a STEP action closes step `step` and every other action works on step `step + 1`."""
    done = e.get("step") or 0
    return done if e["kind"] == Kind.STEP else done + 1


def step_totals(events: Events, *, stages: int) -> dict[int, dict[int, dict[str, float]]]:
    """stage -> step -> kind -> seconds (STARTUP left out), plus "idle": the step's wall time on
    that stage (end of the previous step's last action to this step's last end) not covered by
    any action: the outage after a failure shows up there."""
    out: dict[int, dict[int, dict[str, float]]] = {s: {} for s in range(stages)}
    ends: dict[int, dict[int, tuple[int, int]]] = {s: {} for s in range(stages)}
    for e in events:
        if e["kind"] == Kind.STARTUP:
            continue
        s = e["stage"]
        if not 0 <= s < stages:
            raise ValueError(f"event of stage {s} in a {stages}-stage figure: {e}")
        n = step_of(e)
        kinds = out[s].setdefault(n, {})
        kinds[e["kind"]] = kinds.get(e["kind"], 0.0) + max(0, e["t1"] - e["t0"]) / 1e9
        lo, hi = ends[s].get(n, (e["t0"], e["t1"]))
        ends[s][n] = (min(lo, e["t0"]), max(hi, e["t1"]))
    for s in range(stages):
        previous_end = None
        for n in sorted(out[s]):
            lo, hi = ends[s][n]
            start = lo if previous_end is None else min(lo, previous_end)
            busy = sum(out[s][n].values())
            out[s][n]["idle"] = max(0.0, (hi - start) / 1e9 - busy)
            previous_end = hi
    return out


def step_aggregate_figure(events: Events, *, stages: int, title: str = "", uirevision: str = "steps",
                          recoveries: Sequence[dict[str, Any]] = ()) -> go.Figure:
    """Long runs at a glance: one row per stage (stage 0 on top, shared x = optimizer step), one
    stacked bar per step: seconds by action kind (kind colours, so compute, sends, waits and
    recovery read as in the timeline) plus the step's unrecorded time ("idle / not recorded", grey),
    so slow steps, waits and the outage after a failure stand out. A row whose tallest step is more
    than OUTLIER_FACTOR times its 90th percentile is clipped at 2.5 times that, the clipped bars
    labelled with their height ("↑ 8.9 s"). The legend lists the kinds that reach 1% of some row's
    shown height.
    recoveries: a ✕ "kill" marker over the step each failure hit (by `t_fail_ns`)."""
    if stages < 1:
        raise ValueError(f"stages must be at least 1 (got {stages})")
    totals = step_totals(events, stages=stages)
    kinds = sorted({k for per in totals.values() for ks in per.values() for k in ks if k != "idle"},
                   key=kind_sort_key) + ["idle"]
    gap = 0.06
    h = (1 - gap * (stages - 1)) / stages
    layout: dict[str, Any] = dict(barmode="stack", bargap=0.15)
    data: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    visible: set[str] = set()
    for s in range(stages):
        ax = "" if s == 0 else str(s + 1)
        top = 1 - s * (h + gap)
        layout[f"xaxis{ax}"] = dict(anchor=f"y{ax}", domain=[0, 1], showticklabels=s == stages - 1,
                                    **({} if s == 0 else {"matches": "x"}),
                                    **({"title": dict(text="optimizer step")} if s == stages - 1 else {}))
        layout[f"yaxis{ax}"] = dict(anchor=f"x{ax}", domain=[max(0.0, top - h), top], rangemode="tozero",
                                    title=dict(text=f"stage {s}<br>s", font=dict(size=11)))
        steps = sorted(totals[s])
        heights = sorted(sum(totals[s][n].values()) for n in steps)
        typical = heights[int(0.9 * (len(heights) - 1))] if heights else 0.0
        tallest = heights[-1] if heights else 0.0
        if typical > 0 and tallest > OUTLIER_FACTOR * typical:
            # an outage (or a slow first step) would flatten every other bar: clip the axis, label the
            # clipped bars with their height
            tallest = 2.5 * typical
            layout[f"yaxis{ax}"]["range"] = [0, tallest]
            notes += [dict(text=f"↑ {sum(totals[s][n].values()):.1f} s", x=n, y=tallest, xref=f"x{ax}", yref=f"y{ax}",
                           yanchor="top", showarrow=False, font=dict(size=10, color=NEUTRAL["ink"]),
                           bgcolor="rgba(255,255,255,0.8)")
                      for n in steps if sum(totals[s][n].values()) > tallest]
        for k in kinds:
            ys = [round(totals[s][n].get(k, 0.0), 6) for n in steps]
            if not any(ys):
                continue
            if max(ys) >= 0.01 * tallest:  # in the legend once, and only if some of it can be seen
                visible.add(k)
            data.append(dict(type="bar", x=steps, y=ys, xaxis=f"x{ax}", yaxis=f"y{ax}",
                             name="idle / not recorded" if k == "idle" else kind_label(k), legendgroup=k,
                             showlegend=False,
                             marker=dict(color=NEUTRAL["idle"] if k == "idle" else kind_colour(k)),
                             hovertemplate=f"stage {s} · step %{{x}}<br>{k if k != 'idle' else 'idle / not recorded'}"
                                           f": %{{y:.3f}} s<extra></extra>"))
    for k in visible:  # the first trace of each visible kind carries its legend entry
        next(d for d in data if d["legendgroup"] == k)["showlegend"] = True
    origin_steps = [(r["stage"], r["t_fail_ns"]) for r in recoveries if r.get("t_fail_ns") is not None]
    for s, t in origin_steps:
        if not 0 <= s < stages:
            continue
        hit = [step_of(e) for e in events if e["stage"] == s and e["kind"] != Kind.STARTUP and e["t1"] <= t]
        n = (max(hit) if hit else 1)
        ax = "" if s == 0 else str(s + 1)
        word = next((failure_word(r.get("mode")) for r in recoveries if r.get("t_fail_ns") == t), "failure")
        data.append(dict(type="scatter", x=[n], y=[0], xaxis=f"x{ax}", yaxis=f"y{ax}", mode="markers",
                         cliponaxis=False, marker=dict(symbol="x", size=14, color=FAILURE_COLOURS["kill"]),
                         name="failure", legendgroup="failure",
                         showlegend=not any(d["legendgroup"] == "failure" for d in data),
                         hovertext=[f"stage {s}: {word} during step {n}"], hoverinfo="text"))
    if not data:
        notes.append(dict(text="no actions yet", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5))
    layout["annotations"] = notes
    return fast_figure(data, layout, title=title, height=max(260, 120 + 110 * stages), uirevision=uirevision)

