"""The phases of a recovery, one definition for every place that shows one (the CLI's summary, the
dashboard's recovery line, the timeline's band, labels and hover, Compare, the benchmarks).

A failed stage's recovery runs through five phases, each between two instants the engine records
(monotonic ns, the clock of the events) in the recovery record of metrics.json:

    detect   t_fail_ns     -> t_detect_ns     the coordinator notices (exit, missing heartbeats)
    restart  t_detect_ns   -> t_restore_ns    a replacement process starts and builds its chunk
    restore  t_restore_ns  -> t_restored_ns   it loads its checkpoint (the RESTORE bar: the same instants)
    relink   t_restored_ns -> t_linked_ns     it connects to its neighbours again
    replay   t_linked_ns   -> t_end_ns        it recomputes the micro-batches it lost, until caught up

The record carries each phase's seconds as `<phase>_s` and their sum as `total_s`. A global rollback
has the same phases: restart and restore are the failed stage's, relink lasts until every restarted
stage is connected, replay until every stage is back where the pipeline was. Records written before the
phases were split (no `restart_s`) had `restore_s` = restart + restore and `replay_s` = relink +
replay: `phase_seconds` names them so, rather than calling them what they were not.
"""
from __future__ import annotations

from typing import Any, Mapping

PHASES = ("detect", "restart", "restore", "relink", "replay")
# the instants that bound them, in order: phase i runs from INSTANTS[i] to INSTANTS[i + 1]
INSTANTS = ("t_fail_ns", "t_detect_ns", "t_restore_ns", "t_restored_ns", "t_linked_ns", "t_end_ns")
LEGACY_PHASES = (("detect", "detect_s"), ("restart + restore", "restore_s"), ("relink + replay", "replay_s"))


def field(phase: str) -> str:
    """The record's field of a phase's seconds: "restore" -> "restore_s"."""
    assert phase in PHASES, phase
    return f"{phase}_s"


def absence_end_ns(record: Mapping[str, Any]) -> int | None:
    """Where the figures' failure band ends: the replacement's restore begins (the RESTORE bar follows).
    Records before the phases were split: the restore's end. None while the stage is still away."""
    return record.get("t_restore_ns") or record.get("t_restored_ns")


def phases_from_instants(instants: Mapping[str, int | None]) -> dict[str, float]:
    """`<phase>_s` for every phase whose two instants are known (a later instant missing: the phases
    from there on are 0 — a recovery cut short never reached them)."""
    out = {}
    for i, phase in enumerate(PHASES):
        a, b = instants.get(INSTANTS[i]), instants.get(INSTANTS[i + 1])
        out[field(phase)] = max(0, b - a) / 1e9 if a is not None and b is not None else 0.0
    return out


def phase_seconds(record: Mapping[str, Any]) -> list[tuple[str, float]]:
    """(phase, seconds) in order, as the record has them."""
    if field("restart") in record:
        return [(p, float(record[field(p)])) for p in PHASES]
    return [(name, float(record[key])) for name, key in LEGACY_PHASES if record.get(key) is not None]


def phase_columns(rows: list[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(phase name, field) for a table of records or summaries: the five phases, or, for results
    written before they were split, the three legacy columns under their true names."""
    if any(field("restart") in r for r in rows):
        return [(p, field(p)) for p in PHASES]
    return list(LEGACY_PHASES)


def seconds_text(s: float) -> str:
    """One way to write a duration everywhere: milliseconds below a second ("4.1 ms", "150 ms"), else seconds."""
    if s < 0.01:
        return f"{s * 1e3:.1f} ms"
    if s < 1:
        return f"{s * 1e3:.0f} ms"
    return f"{s:.2f} s"


def phases_text(record: Mapping[str, Any], *, sep: str = ", ") -> str:
    """"detect 150 ms, restart 1.84 s, restore 4.1 ms, relink 12 ms, replay 84 ms"."""
    return sep.join(f"{name} {seconds_text(s)}" for name, s in phase_seconds(record))
