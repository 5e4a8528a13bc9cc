"""The project's cache directory: converted and generated models live under `models/`."""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def cache_dir() -> Path:
    return Path(os.environ.get("ZEROLOCK_CACHE", Path.home() / ".cache" / "zerolock"))


def models_dir() -> Path:
    return cache_dir() / "models"


@contextmanager
def build_lock(target: Path) -> Iterator[None]:
    """Serialises the building of `target` across processes: K stage processes that start together
    must not convert the same model K times (the first builds, the others wait and then find it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(f".{target.name}.lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
