"""A new run's name, one for every path that starts a run: `TIMESTAMP-METHOD-KN` (`20261201-101500-zerolock-K2`).

`zerolock train` without --out and the dashboard's Run both name their runs here, so a run reads the same
wherever it was started, sorts by its start, and a shell glob such as `runs/*-zerolock-K2` finds runs and
never an export beside them (`RUN-peft`, `RUN-merged`).
"""
from __future__ import annotations

import re
import time
from pathlib import Path

# a run's name: the start (local time, to the second), the method, K; "-N" when that second's name was taken
RUN_NAME = re.compile(r"\d{8}-\d{6}-[a-z0-9][a-z0-9-]*-K\d+(-\d+)?")


def run_name(method: str, stages: int, *, when: float | None = None) -> str:
    """The name of a run of `method` on `stages` stages started at `when` (seconds since the epoch; now)."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(when))}-{method}-K{stages}"


def fresh_run_path(parent: str | Path, method: str, stages: int) -> Path:
    """A path under `parent` named `run_name(...)` that does not exist yet, numbered if taken (nothing is
    created: the job takes the directory)."""
    base = Path(parent) / run_name(method, stages)
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path
