"""`zerolock bench recovery`: the paper's E2 — a stage fails mid-run; ZeroLock recovers it locally
(restore + replay from the upstream buffer), 1F1B rolls every stage back. Latency broken into
detect / restore / replay, and the bytes each recovery moved. Repeated runs, side by side, each method
with a fresh replacement process and with a warm standby (runtime/standby.py; "+standby"), whose
failure is injected once the standby is ready — after `--fail-step` steps either way."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from zerolock_core.config.run_config import RunConfig, replace
from zerolock_core.runtime.recovery_phases import PHASES, field, phase_columns
from zerolock_core.jobs.pipeline_job import Run
from .common.experiment import Experiment
from .common.settings import BenchSettings, report_header
from .common.table import preamble

PAPER = {"zerolock": {"total_ms": 2013.1, "MiB": 96}, "1f1b": {"total_ms": 2381.2, "MiB": 192}}
VARIANTS = (("zerolock", False), ("zerolock", True), ("1f1b", False), ("1f1b", True))


def variant_name(method: str, warm: bool) -> str:
    return f"{method} +standby" if warm else method


def fail_one_run(cfg: RunConfig, *, stage: int, step: int, mode: str) -> dict[str, Any]:
    """Start the run, inject the failure once `step` steps are done (and, with a warm standby, once it
    is ready: the question is what a ready standby saves), wait for the end; its metrics."""
    run = Run(cfg, overwrite=True).start()  # a benchmark owns its results directory
    try:
        while run.status().steps_done < step or (run.wants_standby and not run.standby_ready):
            if run.done:
                raise RuntimeError(f"the run ended before the failure could be injected at step {step} "
                                   f"(standby ready: {run.standby_ready}); give it more --steps")
            time.sleep(0.01)
        run.inject_failure(stage, mode)
        metrics = run.wait()
    finally:
        run.stop()
    if metrics is None or metrics.state != "finished" or len(metrics.recovery) != 1:
        raise RuntimeError(f"{cfg.out}: expected one recovery and a finished run, got "
                           f"{metrics.state if metrics else None} with {metrics.recovery if metrics else None}")
    return metrics


def _mean_std(xs: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(xs), "std": statistics.pstdev(xs) if len(xs) > 1 else 0.0}


def run_recovery(settings: BenchSettings, *, out: Path, stages: int, batch: int, microbatches: int, fail_stage: int,
                 fail_step: int, ckpt_every: int, mode: str, repeats: int,
                 variants: tuple[tuple[str, bool], ...] = VARIANTS) -> dict[str, Any]:
    """Every (method, warm standby?) variant `repeats` times, round-robin; every recovery is kept
    (mean ± std over them), not the best."""
    if not 0 <= fail_stage < stages:
        raise ValueError(f"--fail-stage must be in 0..{stages - 1} (got {fail_stage})")
    if not 1 <= fail_step < settings.steps:
        raise ValueError(f"--fail-step must be in 1..{settings.steps - 1} (got {fail_step})")
    rows: dict[str, list[dict[str, Any]]] = {variant_name(m, w): [] for m, w in variants}
    for r in range(repeats):
        for method, warm in variants:
            name = variant_name(method, warm)
            cfg = settings.pipeline(method=method, stages=stages, batch=batch, microbatches=microbatches,
                                    out=out / f"{name.replace(' +', '-')}-{r}")
            cfg = replace(cfg, train={"ckpt_every": ckpt_every, "warm_standby": "on" if warm else "off"})
            rows[name].extend(fail_one_run(cfg, stage=fail_stage, step=fail_step, mode=mode).recovery)
    summary = {method: {k: _mean_std([x[k] for x in recs]) for k in (*(field(p) for p in PHASES), "total_s",
                                                                      "replayed_microbatches", "bytes_transferred")}
               for method, recs in rows.items()}
    return report_header("recovery", settings, config={
        "stages": stages, "batch": batch, "microbatches": microbatches, "steps": settings.steps,
        "fail": f"{fail_stage}@{fail_step}:{mode}", "ckpt_every": ckpt_every, "repeats": repeats,
        "seq_len": settings.seq_len, "model": settings.model}, runs=rows, summary=summary, paper=PAPER)


def format_table(report: dict[str, Any]) -> str:
    columns = phase_columns(list(report["summary"].values()))
    lines = preamble(report, "config: " + ", ".join(f"{k}={v}" for k, v in report["config"].items()),
                     f"{'method':<18} " + "".join(f"{name + ' ms':>{len(name) + 4}} " for name, _ in columns) +
                     f"{'total ms':>14} {'replayed mb':>12} {'MiB moved':>10} {'paper total ms':>15} {'paper MiB':>10}")
    for method, s in report["summary"].items():
        p = report["paper"][method.split()[0]]
        phases = "".join(f"{s[key]['mean'] * 1e3:>{len(name) + 4}.0f} " for name, key in columns)
        lines.append(f"{method:<18} {phases}{s['total_s']['mean'] * 1e3:>8.0f} ± {s['total_s']['std'] * 1e3:<4.0f}"
                     f"{s['replayed_microbatches']['mean']:>12.1f} {s['bytes_transferred']['mean'] / 2**20:>10.3f} "
                     f"{p['total_ms']:>15.1f} {p['MiB']:>10}")
    return "\n".join(lines)


# 60 steps: enough for the standby to be ready mid-run; --repeats here: every variant this many times, all kept
# (mean ± std); b=8 × m=8: the paper's b=1 per micro-batch
EXPERIMENT = Experiment(
    name="recovery", run=run_recovery, format_report=format_table, steps=60, defaults={"repeats": 3},
    shape={"stages": 3, "batch": 8, "microbatches": 8, "methods": False}, runs=False, out=True,
    arguments=lambda a, out: dict(fail_stage=a.fail_stage, fail_step=a.fail_step, ckpt_every=a.ckpt_every,
                                  mode=a.mode, repeats=a.repeats))


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--fail-stage", type=int, default=1)
    p.add_argument("--fail-step", type=int, default=5)
    p.add_argument("--ckpt-every", type=int, default=2)
    p.add_argument("--mode", default="kill", choices=("kill", "stop", "post-step", "mid-ckpt"))
