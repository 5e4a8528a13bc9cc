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

from zerolock_core.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from .presets import resolve_bench_model
from .runner import Experiment, register_experiment
from .settings import BenchSettings, add_common_flags, ints_arg, report_header
from .table import markdown_table, mib

MODES = ("partial", "full")
WORKER_TIMEOUT_S = 600


def measure_stage(cfg: RunConfig, stage: int, mode: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.stage_rss_worker", json.dumps(cfg.to_dict()), str(stage), mode]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"stage {stage} ({mode}) load failed: {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_stage_rss(settings: BenchSettings, *, stages: tuple[int, ...], modes: tuple[str, ...]) -> dict[str, Any]:
    model = resolve_bench_model(settings.model)  # converts / builds a preset once, before the timings
    results: dict[str, Any] = {}
    for k in stages:
        cfg = RunConfig(model=ModelConfig(model=model), data=DataConfig(dataset=settings.dataset, seq_len=settings.seq_len),
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
        rows.append([str(r["stages"]), r["mode"],
                     " / ".join(mib(s["rss"] - s["floor_rss"]) for s in ps),
                     " / ".join(mib(s["peak_rss"] - s["floor_rss"]) for s in ps),
                     " / ".join(mib(s["chunk_param_bytes"]) for s in ps),
                     mib(ps[0]["floor_rss"]), mib(r["startup_peak_rss"])])
    return ("MiB per stage process (stage 0 / 1 / ...), beyond the floor every process pays before any "
            "weight (Python + torch + transformers + peft + tokenizer + data); 'resident' is with every "
            "weight of the chunk touched, as after the first forward\n"
            + markdown_table(["K", "load", "resident", "peak", "chunk parameters", "floor",
                              "run start-up peak (sum of peaks)"], rows))


def figures(report: dict[str, Any]):
    import plotly.graph_objects as go

    fig = go.Figure()
    for mode, color in zip(MODES, ("#636efa", "#bbbbbb")):
        xs, ys = [], []
        for r in report["results"].values():
            if r["mode"] == mode:
                for s, st in enumerate(r["per_stage"]):
                    xs.append(f"K={r['stages']} s{s}")
                    ys.append((st["rss"] - st["floor_rss"]) / 2**20)
        if xs:
            fig.add_trace(go.Bar(x=xs, y=ys, name=f"{mode} load", marker_color=color))
    fig.update_layout(barmode="group", yaxis_title="MiB beyond the runtime floor",
                      title=f"Per-stage resident memory after loading, {report['settings']['model']}")
    return {"stage_rss": fig}


def _stage_rss_arguments(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    modes = tuple(m for m in a.modes.split(",") if m)
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ValueError(f"--modes {a.modes!r}: choose from {', '.join(MODES)}")
    return dict(stages=a.stages_list, modes=modes)


def register(p: argparse.ArgumentParser) -> None:
    add_common_flags(p, steps=1, seq_len=64)
    p.add_argument("--stages-list", type=ints_arg, default=(1, 2, 3, 5), help="K values to measure")
    p.add_argument("--modes", default="partial,full", help="partial (what stages do) and/or full (load all, keep one)")
    register_experiment(p, Experiment(name="stage_rss", run=run_stage_rss, arguments=_stage_rss_arguments,
                                      figures=figures, format_report=format_report))
