"""The parts of metrics.json every trainer fills the same way."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .stage_worker import StepLoss


@dataclass(kw_only=True)
class LossCurves:
    """Per-chunk training-loss curves (mean over the micro-batches of each step)."""
    names: list[str]
    steps: list[int] = field(default_factory=list)
    values: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.values = {n: {"loss": [], "task": [], "consistency": []} for n in self.names}

    def add(self, step: int, per_chunk: dict[str, list[StepLoss]]) -> None:
        self.steps.append(step)
        for name, losses in per_chunk.items():
            v = self.values[name]
            v["loss"].append(sum(x.total for x in losses) / len(losses))
            v["task"].append(sum(x.task for x in losses) / len(losses))
            cons = [x.consistency for x in losses if x.consistency is not None]
            v["consistency"].append(sum(cons) / len(cons) if cons else None)

    def to_json(self) -> list[dict[str, Any]]:
        return [{"chunk": n, "step": self.steps, **self.values[n]} for n in self.names]


def eval_block(per_chunk: list[dict[str, float]]) -> dict[str, Any]:
    last = per_chunk[-1]
    return {"accuracy": last["accuracy"], "label_accuracy": last["label_accuracy"], "nll": last["nll"],
            "examples": last["examples"],
            "per_chunk": [{"chunk": k, **m} for k, m in enumerate(per_chunk)]}
