"""One time base for every view: events carry monotonic nanoseconds; figures show seconds since a
shared origin (the run's start: its earliest event, a STARTUP one when start-ups are recorded), so
timeline lanes, failure marks and memory curves line up. Millisecond helpers stay for durations
and for older callers."""
from __future__ import annotations

from typing import Any, Sequence

from zerolock_core.vocabulary import Kind

Events = Sequence[dict[str, Any]]
NS_PER_MS = 1e6
NS_PER_S = 1e9


def time_origin(events: Events) -> int:
    """The earliest start among `events` (0 if there are none)."""
    return min((e["t0"] for e in events), default=0)


def time_end(events: Events) -> int:
    return max((e["t1"] for e in events), default=0)


def recent(events: Events, window_s: float | None) -> list[dict[str, Any]]:
    """Events that end within the last `window_s` seconds of the latest event (all if None)."""
    if window_s is None:
        return list(events)
    if window_s <= 0:
        raise ValueError(f"window_s must be positive or None (got {window_s})")
    cutoff = time_end(events) - int(window_s * 1e9)
    return [e for e in events if e["t1"] >= cutoff]


def tail_since(events: Events, cutoff_ns: int, *, stages: int) -> list[dict[str, Any]]:
    """The end of `events` from which every event ending at or after `cutoff_ns` is included, and for
    each stage also its last event ending before it (what it held when the window opened). Found from
    the end of the list: every stage appends its events in the order they end, so once
    each stage has shown one event ending before the cutoff, no earlier event of it ends after it. A
    live view's window so costs its own events, not the whole run's (a 3000-step run: ~80k)."""
    pending = set(range(stages))
    start = len(events)
    while start > 0 and pending:
        start -= 1
        e = events[start]
        if e["t1"] < cutoff_ns:
            pending.discard(e["stage"])
    return list(events[start:])


def training_origin(events: Events) -> int:
    """The first action's start (start-ups left out; 0 if there are none): time zero when runs are
    compared from their first micro-batch."""
    return min((e["t0"] for e in events if e["kind"] != Kind.STARTUP), default=time_origin(events))


def to_ms(t_ns: int, origin_ns: int) -> float:
    return (t_ns - origin_ns) / NS_PER_MS


def to_s(t_ns: int, origin_ns: int) -> float:
    return (t_ns - origin_ns) / NS_PER_S


def span_s(events: Events) -> float:
    return (time_end(events) - time_origin(events)) / 1e9 if events else 0.0


def first_steps_s(events: Events, steps: int, *, origin_ns: int | None = None) -> float | None:
    """Seconds from `origin_ns` (default: the earliest event) until every stage that acts finished
    its `steps`-th optimizer step; None if the run has not got that far."""
    done: dict[int, int] = {}
    for e in events:
        if e["kind"] == Kind.STEP and e.get("step", 0) == steps:
            done[e["stage"]] = max(done.get(e["stage"], 0), e["t1"])
    stages = {e["stage"] for e in events if e["kind"] != Kind.STARTUP}
    if not stages or set(done) != stages:
        return None
    return to_s(max(done.values()), time_origin(events) if origin_ns is None else origin_ns)


def recent_window_s(events: Events, *, max_s: float, max_events: int, stages: int | None = None) -> float | None:
    """The live view's window: the last `max_s` seconds, shortened so that it holds at most about
    `max_events` actions (every drawn bar costs the browser time at each redraw); None when
    everything fits. With `stages`, only the end of the list is read (tail_since): the same window."""
    if len(events) <= max_events:
        return None if span_s(events) <= max_s else max_s
    last = events[-max_events:]
    candidates = tail_since(events, min(e["t1"] for e in last), stages=stages) if stages else events
    ends = sorted(e["t1"] for e in candidates)  # holds the max_events latest ends, wherever they are
    return max(1e-3, min(max_s, (ends[-1] - ends[-max_events]) / 1e9))
