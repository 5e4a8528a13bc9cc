"""Simulator output as telemetry events, so Explain and notebooks draw the schedule simulator's
timelines and memory with the very builders that draw live runs."""
from __future__ import annotations

from typing import Any

from zerolock_core.schedule import Costs, Kind, LinkProfile, Schedule, SimResult, simulate

_HOLD = {Kind.F, Kind.REPLAY}  # the simulator's rule: held from F/REPLAY until B/L (W: Schedule.release_kinds)


def events_from_simulation(result: SimResult, *, bytes_per_microbatch: int = 2**20, hidden_bytes: int = 0,
                           grad_bytes: int = 0) -> list[dict[str, Any]]:
    """One event dict per simulated action, shaped like the lines of the runtime's event files.

    `act_bytes` is the number of micro-batches held times `bytes_per_microbatch` (the simulator
    counts micro-batches, not bytes); `inflight` is that count."""
    if bytes_per_microbatch < 0:
        raise ValueError(f"bytes_per_microbatch must be >= 0 (got {bytes_per_microbatch})")
    stages, release = result.schedule.stages, result.schedule.release_kinds
    held: list[set[int]] = [set() for _ in range(stages)]
    steps = [0] * stages
    out: list[dict[str, Any]] = []
    # records are sorted by (start, stage) with a stable sort, so within a stage they stay in
    # execution order even when zero-length sends share a start time with the next action
    for r in result.records:
        a, s = r.action, r.stage
        if a.kind in _HOLD:
            held[s].add(a.microbatch)
        elif a.kind in release:
            held[s].discard(a.microbatch)
        elif a.kind is Kind.STEP:
            steps[s] += 1
        out.append({"stage": s, "kind": a.kind.value, "mb": a.microbatch,
                    "t0": round(r.start_s * 1e9), "t1": round(r.end_s * 1e9),
                    "act_bytes": len(held[s]) * bytes_per_microbatch, "inflight": len(held[s]),
                    "sent": {Kind.SF: hidden_bytes, Kind.SB: grad_bytes}.get(a.kind, 0),
                    "recv": {Kind.RF: hidden_bytes, Kind.RB: grad_bytes}.get(a.kind, 0), "step": steps[s], "gen": 0})
    return out


def simulated_events(schedule: Schedule, costs: Costs, link: LinkProfile, *,
                     bytes_per_microbatch: int = 2**20) -> list[dict[str, Any]]:
    """Simulate `schedule` (zerolock_core.schedule.simulate) and return its events; times are
    the simulator's seconds as nanoseconds on a clock starting at 0."""
    return events_from_simulation(simulate(schedule, costs=costs, link=link),
                                  bytes_per_microbatch=bytes_per_microbatch,
                                  hidden_bytes=costs.hidden_bytes, grad_bytes=costs.grad_bytes)
