"""The BP reference trainer runs in one process; the app starts it as a child process (forked from the
engine's preloaded server, `zerolock_core.runtime.processes`) so no training runs in the web server.
The child is handed the config itself, not a command line rebuilt from it: nothing can be left out."""
from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from zerolock_core.config import RunConfig

from .run_data import read_json

STDERR_LOG = "stderr.log"


def reference_child(cfg: dict[str, Any], stderr_path: str) -> None:
    """The child's body: train `cfg` (it writes metrics.json), its errors into `stderr_path`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the dashboard, which stops us
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    try:
        from zerolock_core.reference_trainer import train_reference

        train_reference(RunConfig.from_dict(cfg), progress=False)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


class ReferenceJob:
    """A reference training child process with the same face as the runtime's `Run`
    (start / status / stop / done / metrics), minus per-stage telemetry, which it has none of."""

    def __init__(self, cfg: RunConfig) -> None:
        if cfg.train.runtime != "reference" or not cfg.out:
            raise ValueError("ReferenceJob needs a --runtime reference config with an output directory")
        self.cfg, self.dir = cfg, Path(str(cfg.out))
        self._proc = None  # a multiprocessing Process once started
        self._stopped = False
        self._t_start = 0.0
        self.metrics: dict[str, Any] | None = None
        self.error = ""

    def start(self) -> "ReferenceJob":
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "metrics.json").unlink(missing_ok=True)
        self._t_start = time.monotonic()
        from zerolock_core.runtime.processes import start_process

        self._proc = start_process(reference_child, (self.cfg.to_dict(), str(self.dir / STDERR_LOG)),
                                   name="zerolock-reference")
        return self

    @property
    def state(self) -> str:
        if self._proc is None:
            return "created"
        code = self._proc.exitcode
        if code is None:
            return "stopping" if self._stopped else "running"
        if self._stopped:
            return "stopped"
        if code == 0 and (self.dir / "metrics.json").exists():
            self.metrics = self.metrics or read_json(self.dir / "metrics.json")
            return "finished"
        if not self.error:
            log = self.dir / STDERR_LOG
            lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
            self.error = lines[-1] if lines else f"exit code {code}"
        return "failed"

    @property
    def done(self) -> bool:
        return self.state in ("finished", "stopped", "failed")

    def status(self) -> dict[str, Any]:
        return {"state": self.state, "stage_states": [], "stage_steps": [], "steps_done": None,
                "total_steps": self.cfg.train.steps, "elapsed_s": time.monotonic() - self._t_start,
                "eta_s": None, "dir": str(self.dir), "error": self.error}

    def stop(self, *, wait: bool = True, timeout: float = 10.0) -> None:
        if self._proc is None or self._proc.exitcode is not None:
            return
        self._stopped = True
        self._proc.terminate()
        if wait:
            self._proc.join(timeout)
            if self._proc.exitcode is None:
                self._proc.kill()
                self._proc.join(timeout)
