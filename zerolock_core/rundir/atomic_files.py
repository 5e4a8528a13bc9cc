"""Files written so that a crash or a full disk never leaves a half-written one: a temporary file beside
the target (`.NAME.tmp-PID`, which `RunDir.sweep_temporaries` removes once its writer is gone), fsynced,
then renamed over the target."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any, Callable


def read_json(path: str | Path) -> Any | None:
    """A JSON file's content, or None when it is missing or unreadable (being written, or damaged)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def read_json_lines(path: str | Path) -> list[Any]:
    """The JSON lines of an append-only file ([] when there is none). A line that does not parse is
    skipped: the last one of a writer killed mid-write, or one still being written."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            if line.strip():
                out.append(json.loads(line))
        except ValueError:
            continue
    return out


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """`obj` as indented JSON: a reader sees the old or the new file, never a half-written one. A failed
    write (a full disk) leaves no temporary file behind."""
    _write_atomic(path, lambda f: (json.dump(obj, f, indent=2, sort_keys=False), f.write("\n")))


def write_text_atomic(path: str | Path, text: str) -> None:
    _write_atomic(path, lambda f: f.write(text))


def _write_atomic(path: str | Path, write: Callable[[IO[str]], object]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
