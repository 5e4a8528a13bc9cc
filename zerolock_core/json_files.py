"""JSON files written so that a crash or a full disk never leaves a half-written one."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_json(path: str | Path) -> Any | None:
    """A JSON file's content, or None when it is missing or unreadable (being written, or damaged)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write to a temporary file, fsync, then rename over `path`: a reader sees the old or the new file,
    never a half-written one. A failed write (a full disk) leaves no temporary file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
