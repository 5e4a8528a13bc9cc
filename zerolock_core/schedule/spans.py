"""Read a run's timeline (engine events or simulator records) the same way on both sides.

A timeline is a list of `Span(stage, kind, mb, t0, t1)` in seconds. Measured and predicted numbers
are computed by the same functions from the same kind of list, so they can be compared fairly; a
measured timeline also costs the simulator's actions (`costs_from_spans`), for the benchmarks'
predictions and the dashboard's predicted timeline alike.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from ..vocabulary import BUSY_KINDS, Kind
from .costs import Costs
from .simulate import SimResult


@dataclass(kw_only=True, frozen=True)
class Span:
    stage: int
    kind: str
    mb: int | None
    t0: float
    t1: float

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0


def spans_from_events(events: Iterable[dict[str, Any]]) -> list[Span]:
    """Engine events (monotonic ns) -> spans in seconds from the first event."""
    events = [e for e in events if "t0" in e and "kind" in e]
    origin = min((e["t0"] for e in events), default=0)
    return [
        Span(stage=e["stage"], kind=e["kind"], mb=e.get("mb"), t0=(e["t0"] - origin) / 1e9, t1=(e["t1"] - origin) / 1e9)
        for e in events
    ]


def spans_from_sim(result: SimResult) -> list[Span]:
    return [
        Span(stage=r.stage, kind=r.action.kind.value, mb=r.action.microbatch, t0=r.start_s, t1=r.end_s)
        for r in result.records
    ]


def window_start(spans: list[Span], *, microbatches: int, skip_windows: int) -> float:
    """When the measured part begins: the start of stage 0's forward of the first kept micro-batch."""
    if skip_windows == 0:
        return min(s.t0 for s in spans)
    first = skip_windows * microbatches
    starts = [s.t0 for s in spans if s.stage == 0 and s.kind == Kind.F and s.mb == first]
    if not starts:
        raise ValueError(
            f"no forward of micro-batch {first} on stage 0: the run has fewer than {skip_windows + 1} windows"
        )
    return starts[0]


def throughput(spans: list[Span], *, batch: int, microbatches: int, windows: int, skip_windows: int) -> float:
    """Samples per second over windows [skip_windows, windows): from stage 0 starting the first kept
    micro-batch to the last action of any stage."""
    if not 0 <= skip_windows < windows:
        raise ValueError(f"skip_windows must be in [0, {windows}) (got {skip_windows})")
    start = window_start(spans, microbatches=microbatches, skip_windows=skip_windows)
    end = max(s.t1 for s in spans)
    return (windows - skip_windows) * batch / (end - start) if end > start else 0.0


def durations(spans: list[Span], *, skip_before: float = 0.0) -> dict[int, dict[str, list[float]]]:
    """stage -> kind -> durations (s) of the spans that start at or after `skip_before`."""
    out: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in spans:
        if s.t0 >= skip_before:
            out[s.stage][s.kind].append(s.seconds)
    return out


def busy_per_stage(spans: list[Span], *, skip_before: float = 0.0) -> dict[int, float]:
    busy: dict[int, float] = defaultdict(float)
    for s in spans:
        if s.t0 >= skip_before and s.kind in BUSY_KINDS:
            busy[s.stage] += s.seconds
    return dict(busy)


def mean_costs(
    spans: list[Span], *, stages: int, skip_before: float = 0.0, fold_sends: bool = True
) -> dict[int, dict[str, float]]:
    """Per stage, the mean seconds of each compute kind (F, L, B, STEP). The mean, not the median:
    a stage's throughput is set by the total time its actions took, slow ones included.

    With `fold_sends`, the median time a stage spends posting a send (SF after F, SB after B) is
    added to the compute action it follows: the simulator's sends are free for the sender, the
    engine's are not quite (posting to gloo, flow-control bookkeeping). The median, because a
    send's mean also holds the waits for flow control, which the simulator models itself."""
    d = durations(spans, skip_before=skip_before)
    out: dict[int, dict[str, float]] = {}
    for stage in range(stages):
        kinds = d.get(stage, {})
        costs = {k: statistics.fmean(v) for k, v in kinds.items() if k in BUSY_KINDS and v}
        if Kind.W in costs and Kind.B in costs:  # Costs' B is a whole backward, W the part of it split off
            costs[Kind.B] += costs[Kind.W]
        if fold_sends:
            for send, compute in ((Kind.SF, Kind.F), (Kind.SB, Kind.B)):
                if kinds.get(send) and compute in costs:
                    costs[compute] += statistics.median(kinds[send])
        out[stage] = costs
    return out


def costs_from_spans(
    spans: list[Span],
    *,
    stages: int,
    hidden_bytes: int,
    grad_bytes: int,
    skip_before: float = 0.0,
    fold_sends: bool = True,
) -> Costs:
    per_stage = mean_costs(spans, stages=stages, skip_before=skip_before, fold_sends=fold_sends)
    return Costs(
        forward=0.0,
        local=0.0,
        backward=0.0,
        step=0.0,
        hidden_bytes=hidden_bytes,
        grad_bytes=grad_bytes,
        per_stage=per_stage,
    )


def compute_per_microbatch(
    spans: list[Span], *, stages: int, microbatches_counted: int, skip_before: float = 0.0
) -> list[float]:
    """Compute seconds (F, L, B, STEP ...) each stage spent per micro-batch after `skip_before`."""
    busy = busy_per_stage(spans, skip_before=skip_before)
    return [busy.get(s, 0.0) / microbatches_counted for s in range(stages)]


def held_activation_peak(events: Iterable[dict[str, Any]], stages: int) -> list[int]:
    """Per stage, the most activation bytes alive *between* actions (what the schedule holds;
    the meter's peak also sees transients inside an action)."""
    peak = [0] * stages
    for e in events:
        if "act_bytes" in e and e["stage"] < stages:
            peak[e["stage"]] = max(peak[e["stage"]], e["act_bytes"])
    return peak


def activation_per_microbatch(events: Iterable[dict[str, Any]], stages: int) -> list[int]:
    """Per stage, the activation bytes one micro-batch adds: the most any forward added to the
    stage's live activation bytes. (The very first forward of a run adds a little less, as some
    storages are still shared with first-call setup; taking the most covers every micro-batch.)"""
    out, before = [0] * stages, [0] * stages
    for e in sorted(events, key=lambda e: e.get("t1", 0)):
        s = e.get("stage")
        if s is None or s >= stages or "act_bytes" not in e:
            continue
        if e.get("kind") == Kind.F:
            out[s] = max(out[s], e["act_bytes"] - before[s])
        before[s] = e["act_bytes"]
    return out
