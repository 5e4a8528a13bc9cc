"""The committed frontier study at its deepest K, for what cites it (Lesson 5's headline, the Run form's price line):
one reader of the summary rows of docs/results/frontier-*.json and one way to say an arm's price."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zerolock_core.analysis.frontier_arms import BASELINE_ARM
from zerolock_core.analysis.frontier_goal import GOAL
from zerolock_core.analysis.recommended import RECOMMENDED_AT_DEPTH, RECOMMENDED_MARK

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
FRONTIER = RESULTS / "frontier-trec6.json"  # a classification task: accuracy
FRONTIERS = (FRONTIER, RESULTS / "frontier-alpaca.json")  # and a generation task: the response's NLL


@dataclass(kw_only=True, frozen=True)
class Frontier:
    task: str
    k: int
    rows: dict[str, dict[str, Any]]  # by arm
    # by arm without update locking: each criterion of the study's goal -> whether the arm meets it
    met: dict[str, dict[str, bool]]
    meeting: frozenset[str] = frozenset()  # the arms that meet the whole goal

    @property
    def bp(self) -> dict[str, Any] | None:
        return self.rows.get(BASELINE_ARM)


def deepest_frontier(path: Path = FRONTIER) -> Frontier | None:
    """The summary rows of the deepest K measured (the first task with it); None without the file or rows."""
    report = json.loads(path.read_text()) if path.is_file() else {}
    rows = report.get("summary", [])
    if not rows:
        return None
    task, k = max(((r["task"], r["K"]) for r in rows), key=lambda tk: tk[1])
    return Frontier(task=task, k=k, rows={r["arm"]: r for r in rows if (r["task"], r["K"]) == (task, k)},
                    met={g["arm"]: g["met"] for g in report.get("goal", []) if (g["task"], g["K"]) == (task, k)},
                    meeting=frozenset(g["arm"] for g in report.get("goal", [])
                                      if g.get("goal") and (g["task"], g["K"]) == (task, k)))


def seeds_words(row: dict[str, Any]) -> str:
    return f"{row['seeds']} seed" + ("s" if row["seeds"] != 1 else "")


def price_words(row: dict[str, Any], *, step: str = " 1F1B's time per step", memory: str = " its activations") -> str:
    """An arm's price against 1F1B: its time per step (when it has one) and its peak activations."""
    return ("" if row["step_time_vs_1f1b"] is None else f"{row['step_time_vs_1f1b']:.2f}×{step} and ") + \
        f"{row['activation_peak_vs_1f1b']:.2f}×{memory}"


# how a line names a criterion of the study's goal it misses (benchmarks/frontier.py's goal rows)
CRITERION_WORDS = {"ahead of schedules": "lead over every backprop schedule"}


def level_words(row: dict[str, Any]) -> str:
    """An arm's final level: the response's NLL on a generation task (lower is better), else its accuracy."""
    return f"NLL {row['nll_mean']:.3f}" if row.get("nll_mean") is not None else f"{row['accuracy_mean']:.3f}"


def recommended_words(paths: tuple[Path, ...] = FRONTIERS) -> str:
    """What the recommended configuration reached at depth and what it cost, on every task measured, in
    one line; "" without a measurement."""
    said = []
    for path in paths:
        f = deepest_frontier(path)
        row = f.rows.get(RECOMMENDED_AT_DEPTH.arm) if f else None
        if f is None or row is None or f.bp is None:
            continue
        missed = [c for c, ok in f.met.get(RECOMMENDED_AT_DEPTH.arm, {}).items() if not ok]
        verdict = (f"misses the goal's {' and '.join(CRITERION_WORDS.get(c, c) for c in missed)}" if missed
                   else "**meets the goal**")
        said.append(f"{f.task} at K = {f.k}, {level_words(row)} ({seeds_words(row)}) against backprop's "
                    f"{level_words(f.bp)} at {price_words(row)}: {verdict}")
    if not said:
        return ""
    goal = f"≤ {GOAL.time_vs_1f1b:g}× 1F1B's time and ≤ {GOAL.activation_vs_1f1b:g}× its activations"
    return (f"{RECOMMENDED_MARK} {RECOMMENDED_AT_DEPTH.words} (`{RECOMMENDED_AT_DEPTH.method}`, recompute "
            f"`{RECOMMENDED_AT_DEPTH.recompute}`), the project's pick for K ≥ 3. On " + "; on ".join(said)
            + f" (the goal: backprop's level in {goal}).")
