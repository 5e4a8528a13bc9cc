"""The committed frontier study at its deepest K, for what cites it (Lesson 5's headline, the Run form's mark):
one reader of the summary rows of docs/results/frontier-trec6.json and one way to say an arm's price."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zerolock_core.analysis.frontier_arms import BASELINE_ARM, readout_arm_name
from zerolock_core.config.readout_spec import RECOMMENDED_AT_DEPTH, RECOMMENDED_MARK

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
FRONTIER = RESULTS / "frontier-trec6.json"
RECOMMENDED_ARM = readout_arm_name(RECOMMENDED_AT_DEPTH)


@dataclass(kw_only=True, frozen=True)
class Frontier:
    task: str
    k: int
    rows: dict[str, dict[str, Any]]  # by arm

    @property
    def bp(self) -> dict[str, Any] | None:
        return self.rows.get(BASELINE_ARM)


def deepest_frontier(path: Path = FRONTIER) -> Frontier | None:
    """The summary rows of the deepest K measured (the first task with it); None without the file or rows."""
    rows = json.loads(path.read_text()).get("summary", []) if path.is_file() else []
    if not rows:
        return None
    task, k = max(((r["task"], r["K"]) for r in rows), key=lambda tk: tk[1])
    return Frontier(task=task, k=k, rows={r["arm"]: r for r in rows if (r["task"], r["K"]) == (task, k)})


def seeds_words(row: dict[str, Any]) -> str:
    return f"{row['seeds']} seed" + ("s" if row["seeds"] != 1 else "")


def price_words(row: dict[str, Any], *, step: str = " 1F1B's time per step", memory: str = " its activations") -> str:
    """An arm's price against 1F1B: its time per step (when it has one) and its peak activations."""
    return ("" if row["step_time_vs_1f1b"] is None else f"{row['step_time_vs_1f1b']:.2f}×{step} and ") + \
        f"{row['activation_peak_vs_1f1b']:.2f}×{memory}"


def recommended_words(path: Path = FRONTIER) -> str:
    """What the marked readout reached at depth and what it cost, in one line; "" without the measurement."""
    f = deepest_frontier(path)
    top = f.rows.get(RECOMMENDED_ARM) if f else None
    if f is None or top is None or f.bp is None:
        return ""
    return (f"{RECOMMENDED_MARK} `{RECOMMENDED_AT_DEPTH}`, ZeroLock's most accurate readout at K ≥ 3: on {f.task} at "
            f"K = {f.k}, {top['accuracy_mean']:.3f} ({seeds_words(top)}) against backprop's "
            f"{f.bp['accuracy_mean']:.3f}, at {price_words(top)}.")
