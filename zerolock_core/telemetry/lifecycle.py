"""A stage process's life outside its schedule: how long its start-up took, phase by phase.

One JSON line per stage process in the run's lifecycle file (`RunDir.lifecycle`), written the moment
it starts its first action: `{"stage", "gen", "kind": "STARTUP", "t0": spawned, "t1": first action,
"phases": {name: [t0, t1]}}` (times are `time.monotonic_ns()`, the clock of the events). Kept out of
the events on purpose: everything that reads events (busy time, spans, throughput) counts the
stages' actions only.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ..rundir.atomic_files import read_json_lines
from ..vocabulary import Kind

# the phases of a start-up, in order: importing torch and the engine, loading the stage's layers,
# restoring its checkpoint, linking to its neighbours (also the stage's state in the store)
STARTUP_PHASES = ("importing", "loading", "restoring", "linking")


class StartupClock:
    """Marks the start of each phase; `record` closes the last one."""

    def __init__(self, *, stage: int, generation: int, spawned_ns: int) -> None:
        self.stage, self.generation = stage, generation
        self.t0 = spawned_ns or time.monotonic_ns()  # 0: nobody said when we were spawned (torchrun)
        self._marks: list[tuple[str, int]] = [("importing", self.t0)]

    def enter(self, phase: str) -> None:
        assert phase in STARTUP_PHASES, phase
        self._marks.append((phase, time.monotonic_ns()))

    def record(self) -> dict[str, Any]:
        end = time.monotonic_ns()
        bounds = [t for _, t in self._marks[1:]] + [end]
        phases = {name: [t, t_next] for (name, t), t_next in zip(self._marks, bounds)}
        return {"stage": self.stage, "gen": self.generation, "kind": Kind.STARTUP, "mb": None, "t0": self.t0,
                "t1": end, "phases": phases}


def write_lifecycle(path: str | Path, record: dict[str, Any]) -> None:
    """Append one record with a single write (several stage processes append at once)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())
    finally:
        os.close(fd)


def read_lifecycle(path: str | Path) -> list[dict[str, Any]]:
    return read_json_lines(path)  # a line still being written is left out
