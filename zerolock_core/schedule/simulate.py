"""Discrete-event simulation of a schedule on modelled time (no wall clock).

Semantics:

* each stage runs its actions strictly in order; compute actions take ``Costs`` seconds;
* a send costs the sender nothing: it starts the transfer and moves on. The transfer
  waits for its directed hop (one link per direction per hop, transfers serialised in
  send order), occupies it for ``bytes / bandwidth`` and arrives ``latency_s`` later;
* a receive blocks until the matching message (same kind, micro-batch, adjacent stage;
  the n-th receive of a message matches its n-th send) has arrived;
* ``inflight_limit=n`` bounds a stage's inbound hidden-state buffer: a stage may not
  start ``SF`` while its receiver holds ``n`` hidden states received or in transit and
  not yet consumed (consumption = start of the receiver's ``F``); it blocks until then;
* activations are counted from the start of ``F``/``REPLAY`` to the end of ``B``/``L`` (of ``W`` where
  the backward is split: W needs the graph B kept); a split B costs the whole backward less its W;
* a schedule that places several stages on one device (DualPipe-V) runs each device's row in order:
  clocks, busy time and held activations are the device's, costs the stage's.

If no stage can progress before all are done, ``Deadlock`` names each stuck stage.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

from .action import COMPUTE_KINDS, RECV_KINDS, Action, Kind, Message
from .costs import Costs, LinkProfile
from .schedule import Deadlock, Schedule

_HOLD = frozenset({Kind.F, Kind.REPLAY})


@dataclass(kw_only=True, frozen=True)
class ActionRecord:
    stage: int  # the lane: the device that ran it (``action.stage`` unless the schedule places chunks)
    action: Action
    start_s: float
    end_s: float


@dataclass(kw_only=True, frozen=True)
class SimResult:
    """Timing of every action plus per-lane aggregates (all tuples indexed by device: the stage unless the
    schedule places several stages on one device; ``inflight`` counts (stage, micro-batch) pairs)."""

    schedule: Schedule
    records: tuple[ActionRecord, ...]  # sorted by (start_s, stage)
    makespan_s: float
    busy_s: tuple[float, ...]  # compute seconds; waiting on receives/buffers is idle
    inflight: tuple[tuple[tuple[float, int], ...], ...]  # step function: (time, count from then on)
    bytes_sent: tuple[int, ...]
    bytes_received: tuple[int, ...]

    @property
    def idle_s(self) -> tuple[float, ...]:
        return tuple(self.makespan_s - b for b in self.busy_s)

    @property
    def active_fraction(self) -> tuple[float, ...]:
        return tuple(b / self.makespan_s if self.makespan_s > 0 else 1.0 for b in self.busy_s)

    @property
    def bubble_fraction(self) -> float:
        """``1 - mean(busy) / makespan``."""
        if self.makespan_s <= 0:
            return 0.0
        return 1.0 - sum(self.busy_s) / len(self.busy_s) / self.makespan_s

    @property
    def throughput_microbatches_per_s(self) -> float:
        total = self.schedule.total_microbatches
        return total / self.makespan_s if self.makespan_s > 0 else float("inf")

    @property
    def inflight_peak(self) -> tuple[int, ...]:
        return tuple(max(count for _, count in series) for series in self.inflight)

    def for_stage(self, stage: int) -> tuple[ActionRecord, ...]:
        return tuple(r for r in self.records if r.stage == stage)

    def record_of(self, action: Action | str) -> ActionRecord:
        """The (first) record of ``action``, e.g. ``result.record_of("1RF0")``."""
        target = Action.parse(action) if isinstance(action, str) else action
        for r in self.records:
            if r.action == target:
                return r
        raise ValueError(f"action {target} is not in the schedule")


class _Sim:
    """Clocks, busy time and held activations are per device (a row of the schedule); costs, buffers and
    messages per stage. Without a placement the two are the same."""

    def __init__(self, schedule: Schedule, costs: Costs, link: LinkProfile, inflight_limit: int | None) -> None:
        k, n = schedule.stages, schedule.devices
        self.schedule, self.link, self.limit = schedule, link, inflight_limit
        compute = [kind for kind in Kind if kind in COMPUTE_KINDS]  # fixed order: errors are reproducible
        device = schedule.device_of
        self.cost = [{kind: costs.compute_s(s, kind, device=device(s)) for kind in compute} for s in range(k)]
        if schedule.splits_backward:
            for s in range(k):
                self.cost[s][Kind.B], self.cost[s][Kind.W] = costs.split_backward_s(s, device=device(s))
        self.release = schedule.release_kinds
        self.nbytes = {Kind.SF: costs.hidden_bytes, Kind.SB: costs.grad_bytes}
        self.clock = [0.0] * n
        self.pos = [0] * n
        self.busy = [0.0] * n
        self.records: list[ActionRecord] = []
        self.arrivals: dict[Message, deque[tuple[float, int]]] = defaultdict(deque)
        self.hop_free: dict[tuple[int, int], float] = defaultdict(float)
        self.hidden_sent_to = [0] * k  # hidden states ever sent to each stage
        self.consumed_at: list[list[float]] = [[] for _ in range(k)]  # F start times of each received stage
        self.held: list[set[tuple[int, int]]] = [set() for _ in range(n)]  # (stage, micro-batch) per device
        self.inflight: list[list[tuple[float, int]]] = [[(0.0, 0)] for _ in range(n)]
        self.sent = [0] * n
        self.received = [0] * n

    def blocked_reason(self, a: Action) -> str | None:
        """Why ``a`` cannot run yet (None if it can)."""
        kind = a.kind
        if kind in COMPUTE_KINDS:
            return None
        if kind in RECV_KINDS and not self.arrivals[a.message]:
            return f"needs {a.counterpart()}, not sent"
        if kind is Kind.SF and self.limit is not None:
            k = self.hidden_sent_to[a.peer]
            if k >= self.limit and len(self.consumed_at[a.peer]) <= k - self.limit:
                return f"stage {a.peer} inbound buffer full: {self.limit} hidden states not yet consumed by F"
        return None

    def execute(self, d: int, a: Action) -> None:
        t = self.clock[d]
        end = t
        if a.is_compute:
            seconds = self.cost[a.stage][a.kind]
            end = t + seconds
            self.busy[d] += seconds
            if a.kind is Kind.F and a.stage > 0:
                self.consumed_at[a.stage].append(t)
            self._track_activations(d, a, t, end)
        elif a.is_send:
            if a.kind is Kind.SF:
                k = self.hidden_sent_to[a.peer]
                if self.limit is not None and k >= self.limit:
                    end = max(t, self.consumed_at[a.peer][k - self.limit])
                self.hidden_sent_to[a.peer] = k + 1
            nbytes = self.nbytes[a.kind]
            hop = (d, self.schedule.device_of(a.peer))
            wire_start = max(end, self.hop_free[hop])
            self.hop_free[hop] = wire_start + self.link.wire_s(nbytes)
            self.arrivals[a.message].append((self.hop_free[hop] + self.link.latency_s, nbytes))
            self.sent[d] += nbytes
        else:
            arrival, nbytes = self.arrivals[a.message].popleft()
            end = max(t, arrival)
            self.received[d] += nbytes
        self.records.append(ActionRecord(stage=d, action=a, start_s=t, end_s=end))
        self.clock[d] = end
        self.pos[d] += 1

    def _track_activations(self, d: int, a: Action, start: float, end: float) -> None:
        held, key = self.held[d], (a.stage, a.microbatch)
        if a.stage < self.schedule.frozen_stages:  # --frozen-stages: no graph, its output only until it is sent
            if a.kind in _HOLD:
                self.inflight[d] += [(start, len(held) + 1), (end, len(held))]
            return
        if a.kind in _HOLD and key not in held:
            held.add(key)
            self.inflight[d].append((start, len(held)))
        elif a.kind in self.release and key in held:
            held.discard(key)
            self.inflight[d].append((end, len(held)))

    def run(self) -> SimResult:
        rows = self.schedule.actions
        while True:
            progressed = False
            for d, row in enumerate(rows):
                while self.pos[d] < len(row) and self.blocked_reason(row[self.pos[d]]) is None:
                    self.execute(d, row[self.pos[d]])
                    progressed = True
            if all(p == len(row) for p, row in zip(self.pos, rows)):
                break
            if not progressed:
                raise Deadlock(
                    {
                        d: (row[self.pos[d]], self.blocked_reason(row[self.pos[d]]))
                        for d, row in enumerate(rows)
                        if self.pos[d] < len(row)
                    }
                )
        return SimResult(
            schedule=self.schedule,
            records=tuple(sorted(self.records, key=lambda r: (r.start_s, r.stage))),
            makespan_s=max(self.clock, default=0.0),
            busy_s=tuple(self.busy),
            inflight=tuple(tuple(series) for series in self.inflight),
            bytes_sent=tuple(self.sent),
            bytes_received=tuple(self.received),
        )


def simulate(schedule: Schedule, *, costs: Costs, link: LinkProfile, inflight_limit: int | None = None) -> SimResult:
    """Run ``schedule`` on modelled time; raises ``Deadlock`` if it cannot finish."""
    if inflight_limit is not None and (
        not isinstance(inflight_limit, int) or isinstance(inflight_limit, bool) or inflight_limit < 1
    ):
        raise ValueError(f"inflight_limit must be None or an int >= 1 (got {inflight_limit!r})")
    return _Sim(schedule, costs, link, inflight_limit).run()


def textbook_bubble(method: str, stages: int, microbatches: int) -> float:
    """Textbook pipeline bubble for ``K`` uniform stages and ``m`` micro-batches.

    * ``gpipe``: ``(K-1) / (m+K-1)``, idle time as a fraction of the makespan
      ``(m+K-1)(tF+tB)`` (Huang et al. 2019); comparable to ``SimResult.bubble_fraction``.
    * ``1f1b``: ``(K-1) / m``, idle time as a fraction of the ideal compute time
      ``m(tF+tB)`` (Narayanan et al. 2021); equals ``bubble / (1 - bubble)`` of a simulation.
    Both describe the same idle time ``(K-1)(tF+tB)``; only the denominators differ.
    """
    for name, value in (("stages", stages), ("microbatches", microbatches)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an int >= 1 (got {value!r})")
    if method == "gpipe":
        return (stages - 1) / (microbatches + stages - 1)
    if method == "1f1b":
        return (stages - 1) / microbatches
    raise ValueError(f"textbook_bubble knows 'gpipe' and '1f1b' only (got {method!r})")
