"""Turn the stages' reports, the events and the eval into the run's metrics.json and trace.json."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..telemetry import read_events, write_chrome_trace


def load_stage_reports(run_dir: Path, stages: int) -> list[dict[str, Any]]:
    reports = []
    for s in range(stages):
        path = run_dir / "stages" / f"stage{s}.json"
        if path.exists():
            reports.append(json.loads(path.read_text()))
    return reports


def loss_curves(cfg: RunConfig, reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    curves = []
    for r in reports:
        losses = r.get("losses", {})
        if not losses:
            continue
        steps = sorted(int(s) for s in losses)
        def mean(key: str, step: int) -> float | None:
            vals = [x[key] for x in losses[str(step)] if x[key] is not None]
            return sum(vals) / len(vals) if vals else None
        name = f"chunk{r['stage']}" if cfg.train.method == "zerolock" else "global"
        curves.append({"chunk": name, "step": [s + 1 for s in steps], "loss": [mean("total", s) for s in steps],
                       "task": [mean("task", s) for s in steps],
                       "consistency": [mean("consistency", s) for s in steps]})
    return curves


def pipeline_metrics(cfg: RunConfig, run_dir: Path, *, eval_block: dict[str, Any] | None, state: str,
                     setup_s: float, errors: dict[int, str]) -> dict[str, Any]:
    reports = load_stage_reports(run_dir, cfg.train.stages)
    firsts = [r["first_ns"] for r in reports if r.get("first_ns") is not None]
    lasts = [r["last_ns"] for r in reports if r.get("last_ns")]
    makespan = (max(lasts) - min(firsts)) / 1e9 if firsts and lasts else 0.0
    steps_done = min((r["steps_done"] for r in reports), default=0) if len(reports) == cfg.train.stages else 0
    samples = steps_done * cfg.train.batch
    per_stage = [{k: v for k, v in r.items() if k not in ("losses", "first_ns", "last_ns")} for r in reports]
    mean_busy = sum(r["busy_s"] for r in reports) / len(reports) if reports else 0.0
    throughput = samples / makespan if makespan > 0 else 0.0
    return {
        "config": cfg.to_dict(),
        "state": state,
        "stopped": state != "finished",
        "errors": {str(k): v for k, v in errors.items()},
        "eval": eval_block,
        "per_stage": per_stage,
        "steps_done": steps_done,
        "throughput_samples_per_s": throughput,
        "samples_per_s": throughput,
        "bubble_fraction": 1.0 - mean_busy / makespan if makespan > 0 else 0.0,
        "wall_s": makespan,
        "setup_s": setup_s,
        "train": {"curves": loss_curves(cfg, reports)},
        "layers": [r["layers"] for r in reports],
    }


def write_trace(run_dir: Path, stages: int) -> None:
    events, _ = read_events(run_dir / "events.jsonl")
    write_chrome_trace(run_dir / "trace.json", events, stages=stages)
