"""Action events: one JSON line per executed action, appended while the run goes.

All stage processes append to the same `events.jsonl`: each event is written with a single
`os.write` on an O_APPEND descriptor, which Linux keeps whole for lines this short, so the
dashboard can tail one file. Times are `time.monotonic_ns()` (one clock base on a host).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(kw_only=True)
class Event:
    stage: int
    kind: str  # F, SF, RF, L, B, SB, RB, STEP, CKPT, REPLAY, RESTORE, WAIT ...
    mb: int | None
    t0: int  # monotonic ns
    t1: int
    act_bytes: int = 0  # live activation bytes after the action
    inflight: int = 0  # micro-batches whose activations are held after the action
    sent: int = 0
    recv: int = 0
    step: int = 0  # optimizer steps done on this stage when the action ended
    gen: int = 0  # process generation (recovery)
    loss: float | None = None  # L (ZeroLock) / the last stage's B (backprop): the micro-batch's training loss


class EventWriter:
    def __init__(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, event: Event) -> None:
        os.write(self._fd, (json.dumps(asdict(event), separators=(",", ":")) + "\n").encode())

    def close(self) -> None:
        os.close(self._fd)


def now_ns() -> int:
    return time.monotonic_ns()


def read_events(path: str | Path, *, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Complete lines from byte `offset` on, and the offset to continue from (a line still being
    written is left for the next call)."""
    path = Path(path)
    if not path.exists():
        return [], offset
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    lines = data[:end].splitlines()
    return [json.loads(line) for line in lines if line.strip()], offset + end

