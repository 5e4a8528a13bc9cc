"""Loss curves while a run goes, from the events: every L (ZeroLock) and the last stage's B (backprop)
carries its micro-batch's training loss. Same shape as metrics.json's `train.curves`, so one figure
draws both; a replayed micro-batch counts once (its latest loss)."""
from __future__ import annotations

from typing import Any, Iterable

from zerolock_core.rundir.loss_curves import curve_name


def live_loss_curves(events: Iterable[dict[str, Any]], *, microbatches: int, method: str) -> list[dict[str, Any]]:
    """Per stage that reports losses: the mean loss of each step's micro-batches seen so far."""
    if microbatches < 1:
        raise ValueError(f"microbatches must be at least 1, got {microbatches}")
    latest: dict[int, dict[int, float]] = {}  # stage -> mb -> loss
    for e in events:
        if e.get("loss") is not None and e.get("mb") is not None:
            latest.setdefault(e["stage"], {})[e["mb"]] = e["loss"]
    curves = []
    for stage in sorted(latest):
        per_step: dict[int, list[float]] = {}
        for mb, loss in latest[stage].items():
            per_step.setdefault(mb // microbatches + 1, []).append(loss)
        steps = sorted(per_step)
        curves.append({"chunk": curve_name(method, stage), "step": steps,
                       "loss": [sum(per_step[s]) / len(per_step[s]) for s in steps]})
    return curves
