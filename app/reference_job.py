"""The BP reference trainer runs in one process; the app starts it as a child process
(`python -m zerolock_core train --runtime reference ...`) so no training runs in the web server."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from zerolock_core.config import RunConfig

from .run_data import read_json


def reference_argv(cfg: RunConfig) -> list[str]:
    """The `zerolock train` command line that reproduces `cfg` (a reference-runtime config)."""
    if cfg.train.runtime != "reference" or not cfg.out:
        raise ValueError("reference_argv needs a --runtime reference config with an output directory")
    m, d, o, t = cfg.model, cfg.data, cfg.objective, cfg.train
    argv = [sys.executable, "-m", "zerolock_core", "train", "--runtime", "reference", "--method", t.method,
            "--out", str(cfg.out), "--quiet",
            "--model", m.model, "--lora-rank", str(m.lora_rank), "--lora-alpha", str(m.lora_alpha),
            "--lora-targets", ",".join(m.lora_targets),
            "--dataset", d.dataset, "--seq-len", str(d.seq_len), "--eval-size", str(d.eval_size),
            "--alpha", ",".join(repr(a) for a in o.alpha), "--consistency", o.consistency,
            "--alpha-schedule", o.alpha_schedule,
            "--stages", str(t.stages), "--batch", str(t.batch), "--microbatches", str(t.microbatches),
            "--steps", str(t.steps), "--lr", repr(t.lr), "--weight-decay", repr(t.weight_decay),
            "--seed", str(t.seed), "--eval-every", str(t.eval_every), "--threads", str(t.threads),
            "--device", t.device]
    argv += ["--readout-adapter", m.readout_adapter, "--readout-adapter-hidden", str(m.readout_adapter_hidden)]
    if m.boundaries is not None:
        argv += ["--boundaries", ",".join(str(b) for b in m.boundaries)]
    return argv


class ReferenceJob:
    """A reference training child process with the same face as the runtime's `Run`
    (start / status / stop / done / metrics), minus per-stage telemetry, which it has none of."""

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg, self.dir = cfg, Path(str(cfg.out))
        self.argv = reference_argv(cfg)
        self._proc: subprocess.Popen | None = None
        self._stopped = False
        self._t_start = 0.0
        self.metrics: dict[str, Any] | None = None
        self.error = ""

    def start(self) -> "ReferenceJob":
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "metrics.json").unlink(missing_ok=True)
        self._t_start = time.monotonic()
        with open(self.dir / "stderr.log", "wb") as err:
            # its own session: a Ctrl-C in the dashboard's terminal reaches the dashboard, which stops it
            self._proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=err,
                                          start_new_session=True)
        return self

    @property
    def state(self) -> str:
        if self._proc is None:
            return "created"
        code = self._proc.poll()
        if code is None:
            return "stopping" if self._stopped else "running"
        if self._stopped:
            return "stopped"
        if code == 0 and (self.dir / "metrics.json").exists():
            self.metrics = self.metrics or read_json(self.dir / "metrics.json")
            return "finished"
        if not self.error:
            lines = (self.dir / "stderr.log").read_text(errors="replace").strip().splitlines()
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
        if self._proc is None or self._proc.poll() is not None:
            return
        self._stopped = True
        self._proc.terminate()
        if wait:
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
