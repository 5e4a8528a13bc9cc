"""`zerolock bench stage-rss`: the resident memory of each stage process after it loads its part
of the model, for several K, against loading the whole model and keeping one chunk.

Each measurement is a fresh process (one at a time, so they do not disturb each other). Beyond the
floor every stage pays (Python + torch + transformers + tokenizer + data), a stage should hold about
1/K of the layers plus the frozen norm + head (+ the embedding on stage 0). The run's start-up peak
is the sum of its stages' peaks: they all load at once.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from zerolock_core.config.run_config import DataConfig, ModelConfig, RunConfig, TrainConfig
from zerolock_core.config.arg_types import ints_arg
from zerolock_core.viz.palette import estimate_colour, stage_colour
from .common.presets import resolve_bench_model
from .common import plots
from .common.experiment import Experiment
from .common.settings import BenchSettings, report_header
from .common.table import markdown_table, mib

MODES = ("partial", "full")
WORKER_TIMEOUT_S = 600


def measure_stage(cfg: RunConfig, stage: int, mode: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.common.stage_rss_worker", json.dumps(cfg.to_dict()), str(stage), mode]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"stage {stage} ({mode}) load failed: {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_stage_rss(settings: BenchSettings, *, stages: tuple[int, ...], modes: tuple[str, ...]) -> dict[str, Any]:
    model = resolve_bench_model(settings.model)  # converts / builds a preset once, before the timings
    results: dict[str, Any] = {}
    for k in stages:
        cfg = RunConfig(model=ModelConfig(model=model),
                        data=DataConfig(dataset=settings.dataset, seq_len=settings.seq_len),
                        train=TrainConfig(runtime="pipeline", method="zerolock", stages=k, threads=1))
        for mode in modes:
            print(f"  K={k} {mode} ...", file=sys.stderr, flush=True)
            per_stage = [measure_stage(cfg, s, mode) for s in range(k)]
            results[f"K={k} {mode}"] = {"stages": k, "mode": mode, "per_stage": per_stage,
                                        "startup_peak_rss": sum(s["peak_rss"] for s in per_stage)}
    return report_header("stage-rss", settings, results=results)


def format_report(report: dict[str, Any]) -> str:
    rows = []
    for r in report["results"].values():
        ps = r["per_stage"]
        beyond = lambda key: " / ".join(mib(s[key] - s["floor_rss"]) for s in ps)  # noqa: E731
        rows.append([str(r["stages"]), r["mode"], beyond("rss"), beyond("peak_rss"),
                     " / ".join(mib(s["chunk_param_bytes"]) for s in ps), mib(ps[0]["floor_rss"]),
                     mib(r["startup_peak_rss"])])
    return ("MiB per stage process (stage 0 / 1 / ...), beyond the floor every process pays before any "
            "weight (Python + torch + transformers + peft + tokenizer + data); 'resident' is with every "
            "weight of the chunk touched, as after the first forward\n"
            + markdown_table(["K", "load", "resident", "peak", "chunk parameters", "floor",
                              "run start-up peak (sum of peaks)"], rows))


def figures(report: dict[str, Any]):
    traces = []
    for i, mode in enumerate(MODES):  # each stage's bar in its shade; a full load the fainter estimate
        bars = [(f"K={r['stages']} s{s}", (st["rss"] - st["floor_rss"]) / 2**20,
                 estimate_colour(stage_colour(s, r["stages"]), i))
                for r in report["results"].values() if r["mode"] == mode for s, st in enumerate(r["per_stage"])]
        if bars:
            x, y, colours = zip(*bars)
            traces.append(plots.bar(f"{mode} load", x, y, marker_color=list(colours)))
    return {"stage_rss": plots.figure(traces, barmode="group", yaxis_title="MiB beyond the runtime floor",
                                      title=f"Per-stage resident memory after loading, {report['settings']['model']}")}


def _stage_rss_arguments(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    modes = tuple(m for m in a.modes.split(",") if m)
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ValueError(f"--modes {a.modes!r}: choose from {', '.join(MODES)}")
    return dict(stages=a.stages_list, modes=modes)


EXPERIMENT = Experiment(name="stage_rss", run=run_stage_rss, arguments=_stage_rss_arguments, figures=figures,
                        format_report=format_report, steps=1, seq_len=64, shape=None, runs=False)


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--stages-list", type=ints_arg, default=(1, 2, 3, 5), help="K values to measure")
    p.add_argument("--modes", default="partial,full", help="partial (what stages do) and/or full (load all, keep one)")
