"""Explain's timeline played back: at time t it draws exactly the actions the simulator started before t
(those still running up to t), on an axis fixed to the whole step, so the bars appear in place and in
order as t moves.

The bars are the timeline builders' own (timeline.py), from the simulator's events (simulated.py); a
dashed line marks t. A lane is a stage, or a device where the schedule places several chunks on one.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from zerolock_core.schedule import ActionRecord, SimResult
from zerolock_core.viz.palette import NEUTRAL

from .layout import frame
from .simulated import events_from_simulation
from .timeline import LANE_HEIGHT_PX, add_timeline_traces, style_lanes

X_TITLE = "simulated seconds from the step's first action"


@dataclass(kw_only=True, frozen=True)
class Played:
    """One schedule to play: its label and its simulation."""
    label: str
    sim: SimResult

    @property
    def lanes(self) -> int:
        return self.sim.schedule.devices

    @property
    def placed(self) -> bool:
        return bool(self.sim.schedule.placement)


def instant(t_s: float) -> float:
    """A simulated time to the nanosecond: sums of costs that differ in their last bit are one instant."""
    return round(t_s, 9)


def started_before(sim: SimResult, t_s: float) -> tuple[ActionRecord, ...]:
    """The simulator's records of the actions that started before `t_s` (strictly), in start order."""
    return tuple(r for r in sim.records if instant(r.start_s) < instant(t_s))


def shown_events(sim: SimResult, t_s: float) -> list[dict[str, Any]]:
    """The events (simulated.py) of the actions started before `t_s`, one per record in the records' order,
    those still running cut at `t_s` (a wait's end is not known before it ends)."""
    events = events_from_simulation(sim)
    assert len(events) == len(sim.records), "one event per simulated action"
    shown = set(map(id, started_before(sim, t_s)))
    now_ns = round(t_s * 1e9) if math.isfinite(t_s) else None
    return [e if now_ns is None or e["t1"] <= now_ns else {**e, "t1": now_ns}
            for e, r in zip(events, sim.records) if id(r) in shown]


def start_times(played: Sequence[Played]) -> tuple[float, ...]:
    """Every instant at which some action starts, and the end of the longest: the stops of a playback."""
    ends = {max(p.sim.makespan_s for p in played)} if played else set()
    return tuple(sorted({instant(t) for t in {r.start_s for p in played for r in p.sim.records} | ends}))


def next_stop(played: Sequence[Played], t_s: float, *, step: int = 1) -> float:
    """The stop after `t_s` (`step` = -1: the one before it; 0 and the end past either end). Moving to
    the next stop draws the actions that start at the current one: one instant's actions a step."""
    stops = list(start_times(played))
    if not stops:
        return 0.0
    later = [s for s in stops if s > instant(t_s)]
    earlier = [s for s in stops if s < instant(t_s)]
    if step > 0:
        return later[0] if later else stops[-1]
    return earlier[-1] if earlier else 0.0


def playback_figure(played: Sequence[Played], *, t_s: float, title: str, x_title: str = X_TITLE) -> go.Figure:
    """One row of lanes per schedule on one fixed time axis (the longest step), the actions started before
    `t_s` drawn (none at 0, all at infinity), a dashed line at `t_s`."""
    if not played:
        raise ValueError("playback_figure needs at least one schedule")
    end = max(p.sim.makespan_s for p in played)
    heights = [p.lanes for p in played]
    fig = make_subplots(rows=len(played), cols=1, shared_xaxes=True, vertical_spacing=0.28 / len(played),
                        row_heights=heights, subplot_titles=[p.label for p in played])
    seen: set[str] = set()
    for i, p in enumerate(played, start=1):
        add_timeline_traces(fig, shown_events(p.sim, t_s), stages=p.lanes, origin_ns=0, webgl=False, row=i, col=1,
                            legend_seen=seen, view_span_s=end, labels=True)
        style_lanes(fig, stages=p.lanes, row=i, col=1)
        if p.placed:  # its lanes are devices, each running several chunks (bars read "3F0": chunk 3)
            fig.update_yaxes(ticktext=[f"device {d}" for d in range(p.lanes)], row=i, col=1)
    if t_s < end:
        fig.add_shape(type="line", x0=t_s, x1=t_s, xref="x", y0=0, y1=1, yref="paper",
                      line=dict(color=NEUTRAL["step"], width=1.5, dash="dash"))
    fig.update_xaxes(range=[0, end * 1.01], ticksuffix=" s")
    fig.update_xaxes(title_text=x_title, row=len(played), col=1)
    frame(fig, title=title, height=110 + sum(LANE_HEIGHT_PX * h + 60 for h in heights), subplot_titles=True,
          uirevision="explain-playback")
    fig.update_layout(barmode="overlay", bargap=0)
    return fig


def playback_caption(played: Sequence[Played], t_s: float) -> str:
    """What the timeline shows at `t_s`: per schedule, how many actions have started and the compute ones
    that started last."""
    end = max(p.sim.makespan_s for p in played)
    if t_s >= end:
        return f"**The whole step** ({1e3 * end:.1f} ms). Press ▶ play, or step through it one instant at a time."
    parts = []
    for p in played:
        shown = started_before(p.sim, t_s)
        compute = [r for r in shown if r.action.is_compute and r.action.microbatch is not None]
        last = instant(compute[-1].start_s) if compute else None
        latest = ", ".join(f"stage {r.action.stage} {r.action.kind.value}{r.action.microbatch}"
                           for r in compute if instant(r.start_s) == last)
        name = p.label.split(" (")[0]
        parts.append(f"{name}: {len(shown)} of {len(p.sim.records)} actions started"
                     + (f" (latest: {latest})" if latest else ""))
    return f"**t = {1e3 * t_s:.1f} ms** of {1e3 * end:.1f} ms · " + " · ".join(parts)
