"""Turn the stages' reports, the events and the eval into the run's metrics.json and trace.json."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from safetensors import safe_open

from ..artifacts import final_weights_path
from ..config import RunConfig
from ..telemetry import read_events, write_chrome_trace
from ..telemetry.activity import bubble_fraction, makespan_s, stage_stats
from .run_dir import CHECKPOINT_LOG


def load_stage_reports(run_dir: Path, stages: int) -> list[dict[str, Any]]:
    reports = []
    for s in range(stages):
        path = run_dir / "stages" / f"stage{s}.json"
        if path.exists():
            reports.append(json.loads(path.read_text()))
    return reports


def final_weight_steps(run_dir: Path, stages: int) -> list[int]:
    """The optimizer step each chunk's final/ weights are from ([] if some chunk has none)."""
    steps = []
    for s in range(stages):
        path = final_weights_path(run_dir, s)
        if not path.exists():
            return []
        with safe_open(str(path), framework="pt") as f:
            step = (f.metadata() or {}).get("step")
        if step is None:
            return []
        steps.append(int(step))
    return steps


def checkpoint_rejections(run_dir: Path) -> list[dict[str, Any]]:
    """Why the checkpoint loader skipped checkpoints (written by the stages, see stage_process)."""
    path = run_dir / CHECKPOINT_LOG
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def session_events(run_dir: Path, since_ns: int) -> list[dict[str, Any]]:
    """The actions of this coordinator's session, every generation of every stage (a recovery's gap
    and replay included)."""
    events, _ = read_events(run_dir / "events.jsonl")
    return [e for e in events if e.get("t0", 0) >= since_ns]


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
                     setup_s: float, errors: dict[Any, str], since_ns: int = 0, start_step: int = 0) -> dict[str, Any]:
    """`since_ns`: when this session of the run began (wall_s covers it from the first action on);
    `start_step`: the step it resumed from (throughput counts only the steps trained here)."""
    reports = load_stage_reports(run_dir, cfg.train.stages)
    events = session_events(run_dir, since_ns)
    activity = stage_stats(events, stages=cfg.train.stages)  # the dashboard computes the same, live
    wall = makespan_s(events)
    steps_done = min((r["steps_done"] for r in reports), default=0) if len(reports) == cfg.train.stages else 0
    samples = max(0, steps_done - start_step) * cfg.train.batch
    per_stage = []
    for r in reports:
        a = activity[r["stage"]]
        per_stage.append({**{k: v for k, v in r.items() if k not in ("losses", "first_ns", "last_ns")},
                          "busy_s": a.busy_s, "idle_s": a.idle_s, "span_s": a.span_s,
                          "active_fraction": a.active_fraction})
    throughput = samples / wall if wall > 0 else 0.0
    return {
        "config": cfg.to_dict(),
        "state": state,
        "stopped": state != "finished",
        "errors": {str(k): v for k, v in errors.items()},
        "eval": eval_block,
        "per_stage": per_stage,
        "steps_done": steps_done,
        "final_steps": final_weight_steps(run_dir, cfg.train.stages),
        "throughput_samples_per_s": throughput,
        "samples_per_s": throughput,
        "bubble_fraction": bubble_fraction(activity, wall),
        "wall_s": wall,
        "setup_s": setup_s,
        "train": {"curves": loss_curves(cfg, reports)},
        "layers": [r["layers"] for r in reports],
        "checkpoint_rejections": checkpoint_rejections(run_dir),
    }


def write_trace(run_dir: Path, stages: int) -> None:
    events, _ = read_events(run_dir / "events.jsonl")
    write_chrome_trace(run_dir / "trace.json", events, stages=stages)
