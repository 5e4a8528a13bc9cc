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
    counts micro-batches, not bytes); `inflight` is that count. Where the schedule places several chunks
    on one device (DualPipe-V), a lane is a device, each event names its `chunk`, and a micro-batch held by
    one chunk counts as its share of a stage (devices / chunks), so the figures compare like with like."""
    if bytes_per_microbatch < 0:
        raise ValueError(f"bytes_per_microbatch must be >= 0 (got {bytes_per_microbatch})")
    schedule, release = result.schedule, result.schedule.release_kinds
    placed, share = bool(schedule.placement), schedule.devices / schedule.stages
    held: list[set[tuple[int, int]]] = [set() for _ in range(schedule.devices)]
    steps = [0] * schedule.devices
    out: list[dict[str, Any]] = []
    # records are sorted by (start, stage) with a stable sort, so within a stage they stay in
    # execution order even when zero-length sends share a start time with the next action
    for r in result.records:
        a, s = r.action, r.stage
        if a.kind in _HOLD:
            held[s].add((a.stage, a.microbatch))
        elif a.kind in release:
            held[s].discard((a.stage, a.microbatch))
        elif a.kind is Kind.STEP:
            steps[s] += 1
        stages_held = len(held[s]) * share if placed else len(held[s])
        event = {"stage": s, "kind": a.kind.value, "mb": a.microbatch,
                 "t0": round(r.start_s * 1e9), "t1": round(r.end_s * 1e9),
                 "act_bytes": round(stages_held * bytes_per_microbatch), "inflight": stages_held,
                 "sent": {Kind.SF: hidden_bytes, Kind.SB: grad_bytes}.get(a.kind, 0),
                 "recv": {Kind.RF: hidden_bytes, Kind.RB: grad_bytes}.get(a.kind, 0), "step": steps[s], "gen": 0}
        if placed and a.kind is not Kind.STEP:
            event["chunk"] = a.stage
        out.append(event)
    return out


def simulated_events(schedule: Schedule, costs: Costs, link: LinkProfile, *,
                     bytes_per_microbatch: int = 2**20) -> list[dict[str, Any]]:
    """Simulate `schedule` (zerolock_core.schedule.simulate) and return its events; times are
    the simulator's seconds as nanoseconds on a clock starting at 0."""
    return events_from_simulation(simulate(schedule, costs=costs, link=link),
                                  bytes_per_microbatch=bytes_per_microbatch,
                                  hidden_bytes=costs.hidden_bytes, grad_bytes=costs.grad_bytes)
