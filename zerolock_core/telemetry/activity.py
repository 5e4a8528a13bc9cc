"""Per-stage activity from the events: busy, idle, span, active fraction, bubble, throughput.

The one definition: metrics.json (runtime/report.py, at the end of a run), the dashboard (while it
goes) and the benchmarks all compute them here, from the event files, so they agree for any run, one
with a recovery included (every process generation of a stage counts; the outage is idle). What is
busy is the vocabulary's compute category (zerolock_core.vocabulary).

Bytes on the wire are counted once per micro-batch and direction, whichever process of a stage moved
them: `bytes_sent` is each micro-batch's first send, `bytes_received` its first arrival, and what a
failure made cross again is apart (`bytes_resent`: a RELINK's resends and a replacement's repeated
sends; `bytes_received_again`). So when every micro-batch has arrived, what stage s sent downstream
equals what stage s + 1 received, across kills and restarts (a process's own counters restart with it).
A compacted step (telemetry/compaction.py: no micro-batch of its own) is counted as it stands."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..vocabulary import Kind, is_busy

Events = Sequence[dict[str, Any]]


@dataclass(kw_only=True, frozen=True)
class StageStats:
    stage: int
    actions: int
    busy_s: float  # compute time; waiting on receives is idle
    span_s: float  # first start to last end on this stage
    peak_act_bytes: int  # after-action samples (metrics.json's peak also sees inside actions)
    peak_inflight: int
    steps: int
    bytes_sent: int  # each micro-batch's first send (per direction)
    bytes_received: int  # each micro-batch's first arrival
    bytes_resent: int = 0  # sent again because of a failure
    bytes_received_again: int = 0  # arrived again (a replacement given what its predecessor had)

    @property
    def active_fraction(self) -> float:
        return self.busy_s / self.span_s if self.span_s > 0 else 0.0

    @property
    def idle_s(self) -> float:
        return max(0.0, self.span_s - self.busy_s)


def makespan_s(events: Events) -> float:
    """First start to last end over every stage (ActivityFold.makespan_s, folded)."""
    return (max(e["t1"] for e in events) - min(e["t0"] for e in events)) / 1e9 if events else 0.0


@dataclass(kw_only=True)
class ActivityFold:
    """The per-stage numbers folded one event at a time, so a live view adds the new events to what it
    folded before instead of going over the whole run again (a 3000-step run has ~80k events)."""
    stages: int
    events: int = 0  # how many events were folded
    first_t0: int | None = None  # over every stage: the makespan
    last_t1: int = 0
    _acc: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._acc = [dict(actions=0, busy=0, first=None, last=0, peak=0, inflight=0, steps=0, sent=0, recv=0,
                          resent=0, recv_again=0, moved=set()) for _ in range(self.stages)]

    def add(self, events: Events) -> "ActivityFold":
        for e in events:
            self.events += 1
            self.first_t0 = e["t0"] if self.first_t0 is None else min(self.first_t0, e["t0"])
            self.last_t1 = max(self.last_t1, e["t1"])
            a = self._acc[e["stage"]]
            a["actions"] += e.get("folded", 1)  # a compacted step's event stands for its kind's actions
            if is_busy(e["kind"]):
                a["busy"] += e["t1"] - e["t0"]
            a["first"] = e["t0"] if a["first"] is None else min(a["first"], e["t0"])
            a["last"] = max(a["last"], e["t1"])
            a["peak"] = max(a["peak"], e.get("act_bytes", 0))
            a["inflight"] = max(a["inflight"], e.get("inflight", 0))
            a["steps"] = max(a["steps"], e.get("step", 0))
            self._count_bytes(a, e)
        return self

    @staticmethod
    def _count_bytes(a: dict[str, Any], e: dict[str, Any]) -> None:
        if e.get("folded"):  # a compacted step's totals, split as they were when it was compacted
            a["sent"] += e.get("sent") or 0
            a["recv"] += e.get("recv") or 0
            a["resent"] += e.get("resent") or 0
            a["recv_again"] += e.get("recv_again") or 0
            return
        split = e["wire"] if "wire" in e else wire_split(e, a["moved"])  # "wire": split when compacted
        for key, nbytes in zip(("sent", "recv", "resent", "recv_again"), split):
            a[key] += nbytes

    @property
    def makespan_s(self) -> float:
        return (self.last_t1 - self.first_t0) / 1e9 if self.first_t0 is not None else 0.0

    def stats(self) -> list[StageStats]:
        return [StageStats(stage=s, actions=a["actions"], busy_s=a["busy"] / 1e9,
                           span_s=(a["last"] - a["first"]) / 1e9 if a["first"] is not None else 0.0,
                           peak_act_bytes=a["peak"], peak_inflight=a["inflight"], steps=a["steps"],
                           bytes_sent=a["sent"], bytes_received=a["recv"], bytes_resent=a["resent"],
                           bytes_received_again=a["recv_again"]) for s, a in enumerate(self._acc)]


def wire_split(e: dict[str, Any], moved: set[tuple[str, int]]) -> tuple[int, int, int, int]:
    """One action's bytes as (sent, received, resent, received again): a micro-batch's first send or
    arrival on its stage, or what a failure made cross again; `moved` holds the (kind, micro-batch) pairs
    its stage has moved so far, and learns this one. The fold and the compaction (which keeps the split in
    its rows) both count with it."""
    sent, recv = e.get("sent") or 0, e.get("recv") or 0
    if e["kind"] == Kind.RESTORE:  # the checkpoint's bytes, read from disk: not the link's
        return 0, 0, 0, 0
    if e["kind"] == Kind.RELINK:  # what a restarted neighbour lost, sent again ...
        first = 0
        for mb, nbytes in e.get("resends") or ():  # ... but a send the failure cut short crosses here first
            if (Kind.SF.value, mb) not in moved:
                moved.add((Kind.SF.value, mb))
                first += nbytes
        return first, 0, sent - first, 0
    if (sent or recv) and e.get("mb") is not None:
        key = (e["kind"], e["mb"])
        if key in moved:
            return 0, 0, sent, recv
        moved.add(key)
    return sent, recv, 0, 0


def stage_stats(events: Events, *, stages: int) -> list[StageStats]:
    return ActivityFold(stages=stages).add(events).stats()


def bubble_fraction(stats: list[StageStats], makespan_s: float) -> float:
    """1 - mean busy / makespan (metrics.json's `bubble_fraction`)."""
    if makespan_s <= 0 or not stats:
        return 0.0
    return max(0.0, 1.0 - sum(s.busy_s for s in stats) / len(stats) / makespan_s)


def live_throughput(stats: list[StageStats], *, elapsed_s: float, batch: int) -> float | None:
    """Samples per second so far: optimizer steps every stage has finished x batch / elapsed."""
    steps = min((s.steps for s in stats), default=0)
    return steps * batch / elapsed_s if steps and elapsed_s > 0 else None
