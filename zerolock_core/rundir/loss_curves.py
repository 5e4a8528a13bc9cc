"""Training-loss curves: per chunk, the mean over each step's micro-batches of the local (ZeroLock) or
the model's (backprop) loss, with its task and consistency parts.

A curve is `{"chunk": name, "step": [...], "loss": [...], "task": [...], "consistency": [...]}`.
Every step is kept in the run's curves.jsonl; metrics.json keeps at most `MAX_CURVE_POINTS` points
per curve (`summarise`: means over equal runs of steps), so it stays small on a long run.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .metrics import MAX_CURVE_POINTS

SERIES = ("loss", "task", "consistency")
GLOBAL = "global"  # the one curve of a backprop run: the model's loss


def curve_name(method: str, chunk: int) -> str:
    """The curve of chunk `chunk`'s losses: its own under a local method, the model's under backprop."""
    from ..methods import LOCAL_METHODS

    return f"chunk{chunk}" if method in LOCAL_METHODS else GLOBAL


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


@dataclass(kw_only=True)
class LossCurves:
    """Curves built step by step (the reference trainer)."""
    names: list[str]
    steps: list[int] = field(default_factory=list)
    values: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.values = {n: {s: [] for s in SERIES} for n in self.names}

    def add(self, step: int, per_chunk: dict[str, list[Any]]) -> None:
        """`per_chunk`: chunk name -> the step's `StepLoss`es, one per micro-batch."""
        self.steps.append(step)
        for name, losses in per_chunk.items():
            v = self.values[name]
            v["loss"].append(_mean(x.total for x in losses))
            v["task"].append(_mean(x.task for x in losses))
            v["consistency"].append(_mean(x.consistency for x in losses))

    def last(self, name: str) -> float | None:
        series = self.values[name]["loss"]
        return series[-1] if series else None

    def to_json(self) -> list[dict[str, Any]]:
        return [{"chunk": n, "step": list(self.steps), **self.values[n]} for n in self.names]


def from_step_losses(name: str, losses: dict[int, list[dict[str, float | None]]]) -> dict[str, Any]:
    """A curve from a stage's losses by step (0-based step -> one dict per micro-batch)."""
    steps = sorted(losses)
    curve: dict[str, Any] = {"chunk": name, "step": [s + 1 for s in steps]}
    for series, key in zip(SERIES, ("total", "task", "consistency")):
        curve[series] = [_mean(x[key] for x in losses[s]) for s in steps]
    return curve


def summarise(curves: list[dict[str, Any]], max_points: int = MAX_CURVE_POINTS) -> tuple[list[dict[str, Any]], str]:
    """Curves of at most `max_points` points (each the mean of an equal run of steps, at its last step),
    and a note saying so ("" when nothing was merged)."""
    longest = max((len(c["step"]) for c in curves), default=0)
    if longest <= max_points:
        return curves, ""
    per = -(-longest // max_points)
    out = []
    for c in curves:
        groups = [range(i, min(i + per, len(c["step"]))) for i in range(0, len(c["step"]), per)]
        merged = {"chunk": c["chunk"], "step": [c["step"][g[-1]] for g in groups]}
        for series in SERIES:
            merged[series] = [_mean(c[series][i] for i in g) for g in groups]
        out.append(merged)
    return out, f"each point is the mean of {per} steps; curves.jsonl has every step"


def write_curves(path: Path, curves: list[dict[str, Any]]) -> None:
    """Every step of every curve, one JSON line per step: {"step": n, "chunk0": {"loss", "task", ...}}."""
    rows: dict[int, dict[str, Any]] = {}
    for c in curves:
        for i, step in enumerate(c["step"]):
            rows.setdefault(step, {"step": step})[c["chunk"]] = {s: c[s][i] for s in SERIES}
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            for step in sorted(rows):
                f.write(json.dumps(rows[step], separators=(",", ":")) + "\n")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_curves(path: Path) -> list[dict[str, Any]]:
    """The full curves back from curves.jsonl ([] when there is none)."""
    if not path.exists():
        return []
    curves: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        for name, values in row.items():
            if name == "step":
                continue
            c = curves.setdefault(name, {"chunk": name, "step": [], **{s: [] for s in SERIES}})
            c["step"].append(row["step"])
            for s in SERIES:
                c[s].append(values.get(s))
    return list(curves.values())


def full_curves(run_dir: str | Path, summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every step of a run's curves: its curves.jsonl, or the record's own curves where there is none."""
    from .run_dir import RunDir

    return read_curves(RunDir(run_dir).curves) or summary
