"""What a pipeline run's final eval (runtime/final_eval.py) says while it runs (eval_progress.json), and
the one wording of it that the CLI and the dashboard show."""
from __future__ import annotations

from typing import Any

FINAL_WEIGHTS = "the final weights"


def snapshot_words(step: int, *, number: int, evals: int) -> str:
    """Which weights an eval scores, for a `--eval-every` snapshot: "the weights of step 30 (1 of 9 evals)"."""
    return f"the weights of step {step} ({number} of {evals} evals)"


def evaluating_words(progress: dict[str, Any] | None, *, sep: str = " / ") -> str:
    """"evaluating the final weights: 96 / 256 examples", or its phase while it has no count yet."""
    ev = progress or {}
    what = ev.get("what") or FINAL_WEIGHTS
    if ev.get("total"):
        return f"evaluating {what}: {ev['scored']}{sep}{ev['total']} examples"
    return f"evaluating {what} ({ev.get('phase', 'starting')})"
