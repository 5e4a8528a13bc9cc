"""Pipeline runs for benchmarks: run a config once (cached by its content), keep what it measured.

A run that fails with `MemoryBudgetExceeded` (or a CUDA out-of-memory error) is an outcome, not an
error: the envelope benchmark counts it as OOM. Any other failure is raised.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerolock_core.config.run_config import RunConfig
from zerolock_core.rundir.metrics import Metrics
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.telemetry import read_events

OOM_MARKERS = ("MemoryBudgetExceeded", "OutOfMemoryError", "CUDA out of memory")


@dataclass(kw_only=True)
class RunOutcome:
    cfg: RunConfig
    dir: Path
    metrics: Metrics | None
    error: str | None = None
    _events: list[dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def oom(self) -> bool:
        return self.error is not None and any(m in self.error for m in OOM_MARKERS)

    @property
    def events(self) -> list[dict[str, Any]]:
        if self._events is None:
            self._events, _ = read_events(RunDir(self.dir).event_files())
        return self._events

    @property
    def per_stage(self) -> list[dict[str, Any]]:
        assert self.metrics is not None, "a failed run has no per-stage metrics"
        return self.metrics.per_stage


def config_key(cfg: RunConfig) -> str:
    d = cfg.to_dict()
    d.pop("out", None)
    return hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:10]


def run_name(cfg: RunConfig) -> str:
    t = cfg.train
    link = "" if cfg.link.profile == "none" else f"-{cfg.link.profile}"
    return f"{t.method}-K{t.stages}-b{t.batch}-m{t.microbatches}{link}-{config_key(cfg)}"


class PipelineRuns:
    """Runs pipelines under `root/runs/`, each distinct config `repeats` times per instance.

    With repeats > 1, `prefetch` runs the configs round-robin (all once, then all again ...), so a
    burst of other work on a shared machine hits every method alike, and `run` returns the least
    disturbed repeat: the successful one with the highest throughput (best of R).
    """

    def __init__(self, root: Path, *, verbose: bool = True, repeats: int = 1) -> None:
        if repeats < 1:
            raise ValueError(f"--repeats must be at least 1 (got {repeats})")
        self.root, self.verbose, self.repeats = Path(root), verbose, repeats
        self._done: dict[str, list[RunOutcome]] = {}

    def dir_for(self, cfg: RunConfig, repeat: int = 0) -> Path:
        suffix = f"-r{repeat}" if self.repeats > 1 else ""
        return self.root / "runs" / (run_name(cfg) + suffix)

    def prefetch(self, cfgs: list[RunConfig]) -> None:
        """Run every config `repeats` times, round-robin (configs already run are skipped)."""
        for r in range(self.repeats):
            self.run_round(cfgs, r)

    def run_round(self, cfgs: list[RunConfig], repeat: int) -> None:
        """Repeat number `repeat` of every config (callers interleave other work between rounds)."""
        for key, cfg in {config_key(c): c for c in cfgs}.items():
            done = self._done.setdefault(key, [])
            while len(done) <= repeat:
                done.append(self._run_once(cfg, len(done)))
            if done[0].error is not None:  # over budget: repeating will not change that
                self._done[key] = done[:1] * self.repeats

    def all(self, cfg: RunConfig) -> list[RunOutcome]:
        self.prefetch([cfg])
        return self._done[config_key(cfg)]

    def outcomes(self, cfgs: list[RunConfig]) -> list[RunOutcome]:
        """The best run of every config, all of them run round-robin first (see `prefetch`)."""
        self.prefetch(cfgs)
        return [self.run(c) for c in cfgs]

    def run(self, cfg: RunConfig) -> RunOutcome:
        """The best of the config's repeats (`cfg.out` is ignored: runs go under `root/runs/`)."""
        outcomes = self.all(cfg)
        ok = [o for o in outcomes if o.ok]
        return max(ok, key=lambda o: o.metrics.throughput_samples_per_s) if ok else outcomes[0]

    def _run_once(self, cfg: RunConfig, repeat: int) -> RunOutcome:
        from zerolock_core.config.run_config import replace
        from zerolock_core.jobs.job import JobFailed, train  # torch: only when a run starts

        out = self.dir_for(cfg, repeat)
        cfg = replace(cfg, out=str(out))
        if self.verbose:
            print(f"  run {out.name} ...", flush=True)
        try:
            return RunOutcome(cfg=cfg, dir=out, metrics=train(cfg, progress=False, overwrite=True))
        except JobFailed as err:
            metrics = RunDir(out).read_metrics()
            details = "\n".join(metrics.errors.values() if metrics else ()) or str(err)
            outcome = RunOutcome(cfg=cfg, dir=out, metrics=metrics, error=details)
            if not outcome.oom:
                raise
            return outcome
