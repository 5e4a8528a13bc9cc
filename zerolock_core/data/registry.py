"""``--dataset`` spec -> TaskData."""

from __future__ import annotations

import functools

from .agnews import load_agnews_csv, load_agnews_hub
from .examples import TaskData
from .needle import make_needle
from .topics import make_topics

ACCEPTED_SPECS = ("topics", "needle", "ag_news", "csv:PATH")


@functools.lru_cache(maxsize=16)
def _synthetic(name: str, seed: int) -> TaskData:
    # TaskData is frozen and holds tuples, so sharing one instance is safe.
    return make_topics(seed=seed) if name == "topics" else make_needle(seed=seed)


def load_task(spec: str, *, seed: int = 0) -> TaskData:
    """Load a task by spec: "topics", "needle", "ag_news" or "csv:PATH" (seed: synthetic only)."""
    if spec in ("topics", "needle"):
        return _synthetic(spec, seed)
    if spec == "ag_news":
        return load_agnews_hub(n_train=None, n_eval=None)
    if spec.startswith("csv:") and spec[len("csv:"):].strip():
        return load_agnews_csv(spec[len("csv:"):].strip())
    raise ValueError(f"unknown dataset {spec!r}; expected one of: {', '.join(ACCEPTED_SPECS)}")
