"""The accuracy a constant answer gets (the chance line of every accuracy chart)."""
from __future__ import annotations

from typing import Any

from zerolock_core.rundir.metrics import Metrics


def label_count(dataset: str | None) -> int | None:
    """How many label words the dataset spec has, without loading it (None: unknown)."""
    if not dataset:
        return None
    from zerolock_core.data.needle import NEEDLE_LABEL_WORDS
    from zerolock_core.data.topics import TOPIC_LABEL_WORDS

    if dataset == "needle":
        return len(NEEDLE_LABEL_WORDS)
    if dataset in ("topics", "ag_news"):
        return len(TOPIC_LABEL_WORDS)
    return None  # a file: its words come from the data (the eval record's `labels` says how many)


def chance_level(metrics: Metrics | None, config: dict[str, Any] | None = None) -> tuple[float, str] | None:
    """The label accuracy a constant answer gets: the eval's majority-class rate when the record has it
    (`eval.majority_rate`, or `eval.chance`), else 1 / the number of labels (from `eval.labels` or the
    dataset spec in the config). (value, what it is), or None when unknown."""
    ev = (metrics.eval if metrics else None) or {}
    for key, what in (("majority_rate", "majority class"), ("chance", "chance")):
        if isinstance(ev.get(key), (int, float)):
            return float(ev[key]), what
    labels = ev.get("labels")
    n = len(labels) if isinstance(labels, (list, tuple)) else labels if isinstance(labels, int) else None
    if n is None:
        cfg = config or (metrics.config if metrics else {})
        n = label_count((cfg.get("data") or {}).get("dataset"))
    return (1.0 / n, f"chance 1/{n}") if n else None
