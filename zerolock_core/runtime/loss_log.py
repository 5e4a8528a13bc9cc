"""A stage's training losses, appended one JSON line per optimizer step as the stage goes.

Kept out of checkpoints on purpose (a checkpoint carrying the whole history grows with every step:
its writes would cost quadratic time over a run). A restored stage cuts its log back to the step of
the checkpoint it restored, then appends the replayed steps again, so a recovered run's log equals an
unfailed one's. Only the stage's current process writes it (a replacement starts after its
predecessor is gone).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..rundir.atomic_files import read_json_lines
from ..train.stage_worker import StepLoss


class LossLog:
    def __init__(self, path: Path, *, keep_below: int) -> None:
        """Open the log, keeping only the lines of steps < `keep_below` (0-based steps)."""
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        kept = [line for line in read_json_lines(path) if line["step"] < keep_below]
        if path.exists():
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            try:
                tmp.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in kept))
                tmp.replace(path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def append(self, step: int, losses: list[StepLoss]) -> None:
        """The 0-based `step`'s losses, one per micro-batch, in one write (a kill never leaves half a line
        that parses)."""
        line = {"step": step, "losses": [{"total": x.total, "task": x.task, "consistency": x.consistency}
                                         for x in losses]}
        os.write(self._fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())

    def close(self) -> None:
        os.close(self._fd)


def read_losses(path: Path) -> dict[int, list[dict[str, float | None]]]:
    """0-based step -> the step's losses (one dict per micro-batch); the last line of a step wins."""
    return {line["step"]: line["losses"] for line in read_json_lines(path)}
