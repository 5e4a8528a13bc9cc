"""Action events: one JSON line per executed action, appended while the run goes.

All stage processes append to the same event files (`RunDir.event_files`: one per `SEGMENT_STEPS`
optimizer steps, so no file grows with the run): each event is written with a single `os.write` on an
O_APPEND descriptor, which Linux keeps whole for lines this short, so the dashboard can tail them.
Times are `time.monotonic_ns()` (one clock base on a host). Segments every stage has left far behind
are compacted to one row per stage and step (compaction.py); `read_events` gives their events back.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .compaction import compact_file, parse_lines


SEGMENT_STEPS = 100  # optimizer steps per event file (K=3, m=4: about 480 KB, 100 KB once compacted)


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
    paced_ns: int = 0  # of t1 - t0, the wait a slowed stage added after the real compute (runtime/pace.py)
    cpu_ns: int = 0  # this process's CPU time during the action (before that wait): what a slowed CPU stage stretches
    # RELINK upstream of a replaced stage: [micro-batch, bytes] of each hidden state it sent on the new link
    # (one whose own SF was cut short by the failure crosses here for the first time: activity.wire_split)
    resends: list[list[int]] | None = None


class EventWriter:
    """Appends events to the run's event files, one file per `SEGMENT_STEPS` optimizer steps (the file of
    an event is its step's): no file grows with the run, and a reader pages through them in order.
    `path_of(index)` names segment `index` (RunDir.event_file)."""

    def __init__(self, path_of: Callable[[int], Path]) -> None:
        self._path_of = path_of
        self._segment: int | None = None
        self._fd: int | None = None

    def write(self, event: Event) -> None:
        segment = event.step // SEGMENT_STEPS
        if segment != self._segment:  # a replacement that restored an older step writes its old file again
            self.close()
            path = self._path_of(segment)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._segment = segment
        os.write(self._fd, (json.dumps(asdict(event), separators=(",", ":")) + "\n").encode())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd, self._segment = None, None


def now_ns() -> int:
    return time.monotonic_ns()


Cursor = dict[str, int]  # event file name -> bytes read of it (and "NAME#ino" -> the file read)


def read_events(files: Iterable[str | Path], *, cursor: Cursor | None = None) -> tuple[list[dict[str, Any]], Cursor]:
    """Complete lines of `files` (in their order) past the `cursor`, and the cursor to continue from: a
    line still being written is left for the next call; a file that has not grown is not opened. A file
    replaced by its compaction since the cursor read it is not read again: its events were read (as
    actions) already."""
    cursor = dict(cursor or {})
    out: list[dict[str, Any]] = []
    for path in map(Path, files):
        offset = cursor.get(path.name, 0)
        try:
            st = path.stat()
            if offset and cursor.get(f"{path.name}#ino", st.st_ino) != st.st_ino:  # compacted since
                offset = st.st_size
            if st.st_size <= offset:
                cursor[path.name], cursor[f"{path.name}#ino"] = offset, st.st_ino
                continue
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            continue
        end = data.rfind(b"\n") + 1
        out += parse_lines(data[:end])
        cursor[path.name], cursor[f"{path.name}#ino"] = offset + end, st.st_ino
    return out, cursor


def compact_old_segments(files: Iterable[str | Path], *, below_step: int) -> int:
    """Compact every event segment whose steps all lie below `below_step` (compaction.compactable_below
    says which step that is); returns the bytes saved."""
    saved = 0
    for path in map(Path, files):
        if path.stem.isdigit() and (int(path.stem) + 1) * SEGMENT_STEPS <= below_step:
            saved += compact_file(path)
    return saved
