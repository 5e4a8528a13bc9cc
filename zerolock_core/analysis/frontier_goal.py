"""The frontier study's goal, for the study that checks it (benchmarks/frontier.py goal_rows) and the pages
that quote its thresholds beside its verdicts (app/frontier_summary.py)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(kw_only=True, frozen=True)
class Goal:
    """The goal issue 41 set: a configuration without update locking as accurate as BP (mean of `seeds`
    seeds within `accuracy_within`; a pairs task's response NLL within `nll_within` of BP's, relative), in at
    most `time_vs_1f1b` of 1F1B's time and ahead of every exact-gradient schedule, with at most
    `activation_vs_1f1b` of 1F1B's peak activation memory, and not beaten by its BP control (the same
    trainable parameters) by more than the larger seed sd of the two."""

    accuracy_within: float = 0.01
    nll_within: float = 0.02
    time_vs_1f1b: float = 0.8
    activation_vs_1f1b: float = 0.5
    seeds: int = 3


GOAL = Goal()
CRITERIA = ("accuracy", "seeds", "time", "ahead of schedules", "memory", "control")
