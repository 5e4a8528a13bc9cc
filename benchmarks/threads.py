"""`zerolock bench threads`: how many torch threads a process that computes on its own should take.

The single-process reference trainer (the method of --method, K of --stages, --steps steps) runs with
every thread count from 1 to the cores: first alone on the machine, then beside a 2-stage ZeroLock
pipeline run (the load that a dashboard run or a second benchmark puts on it). Every trainer is a fresh
process, started as the engine starts its own; samples/s is the trainer's own, after its set-up. The
engine's thread policy (`zerolock_core/train/threads.py`) follows what this measures.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from zerolock_core.config.run_config import DataConfig, ModelConfig, RunConfig, TrainConfig
from .common.machine import cores
from .common.presets import resolve_bench_model
from .common.experiment import Experiment
from .common.settings import BenchSettings, report_header
from .common.table import markdown_table, preamble

TIMEOUT_S = 900.0  # one trainer; far above what a 20-step run takes on 2 cores beside a pipeline


def _train_child(cfg_dict: dict[str, Any], result: str) -> None:
    from zerolock_core.train.reference_trainer import train_reference

    metrics = train_reference(RunConfig.from_dict(cfg_dict), progress=False, overwrite=True)
    Path(result).write_text(json.dumps({"samples_per_s": metrics.throughput_samples_per_s}))


def reference_rate(cfg: RunConfig, out: Path) -> float:
    """samples/s of one reference trainer in its own process (killed past TIMEOUT_S)."""
    from zerolock_core.runtime import processes

    out.mkdir(parents=True, exist_ok=True)
    result = out / "result.json"
    result.unlink(missing_ok=True)
    p = processes.start_process(_train_child, (cfg.to_dict(), str(result)), name="threads-reference")
    p.join(TIMEOUT_S)
    if p.is_alive():
        p.kill()
        p.join(10)
        raise TimeoutError(f"the reference trainer ran past {TIMEOUT_S:.0f} s ({cfg.train.threads} threads)")
    if p.exitcode != 0 or not result.exists():
        raise RuntimeError(f"the reference trainer failed (exit code {p.exitcode}, {cfg.train.threads} threads)")
    return json.loads(result.read_text())["samples_per_s"]


def _load(settings: BenchSettings, out: Path):
    """A 2-stage ZeroLock pipeline run that trains until it is stopped; returned once it runs."""
    from zerolock_core.jobs.pipeline_job import Run

    run = Run(settings.pipeline(method="zerolock", stages=2, batch=8, microbatches=4, steps=100_000, out=out),
              overwrite=True).start()
    deadline = time.monotonic() + 300
    while run.status().state != "running":
        if run.done or time.monotonic() > deadline:
            run.stop(timeout=60)
            raise RuntimeError(f"the pipeline beside the trainers did not start: {run.status().reason}")
        time.sleep(0.5)
    return run


def run_threads(settings: BenchSettings, *, out: Path, method: str, stages: int, batch: int,
                microbatches: int) -> dict[str, Any]:
    counts = list(range(1, cores() + 1))

    def cfg(threads: int) -> RunConfig:
        return RunConfig(model=ModelConfig(model=resolve_bench_model(settings.model)),
                         data=DataConfig(dataset=settings.dataset, seq_len=settings.seq_len, eval_size=1),
                         train=TrainConfig(runtime="reference", method=method, stages=stages, batch=batch,
                                           microbatches=microbatches, steps=settings.steps, lr=settings.lr,
                                           seed=settings.seed, threads=threads, final_eval=False),
                         out=str(out / f"reference-{threads}"))

    alone = {str(n): reference_rate(cfg(n), out / f"reference-{n}") for n in counts}
    load = _load(settings, out / "pipeline-beside")
    try:
        beside = {str(n): reference_rate(cfg(n), out / f"reference-{n}-beside") for n in counts}
    finally:
        load.stop(timeout=60)
    return {**report_header("threads", settings),
            "config": {"method": method, "stages": stages, "batch": batch, "microbatches": microbatches,
                       "cores": cores(), "beside": "a 2-stage ZeroLock pipeline run (b=8, m=4), one thread a stage"},
            "results": {"alone": alone, "beside_a_pipeline": beside}}


def format_report(report: dict[str, Any]) -> str:
    c, res = report["config"], report["results"]
    lines = preamble(report, f"reference trainer {c['method']}, K={c['stages']}, b={c['batch']}, "
                             f"m={c['microbatches']}, {report['settings']['steps']} steps; samples/s (and against "
                             f"1 thread) alone and beside {c['beside']}")
    rows = [[n, *(f"{res[k][n]:.1f} ({res[k][n] / res[k]['1']:.2f}x)" for k in ("alone", "beside_a_pipeline"))]
            for n in res["alone"]]
    lines.append(markdown_table(["threads", "alone", "beside a pipeline"], rows))
    return "\n".join(lines)


EXPERIMENT = Experiment(name="threads", run=run_threads, format_report=format_report, steps=20, runs=False, out=True,
                        shape={"stages": 3, "methods": False}, arguments=lambda a, out: {"method": a.method})


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--method", default="bp", choices=("bp", "zerolock"), help="the reference trainer's method")
