"""`Metrics`: the record every run ends with (metrics.json), whatever its runtime and however it ended.

One keyword-only record for the reference trainer, the pipeline's coordinator and torchrun's rank 0;
`RunDir.write_metrics` is its one writer and `RunDir.read_metrics` its one reader, which also reads
the files earlier versions wrote (`Metrics.from_json`). Nested parts (a stage's numbers, an eval, a
recovery) stay plain JSON objects, described where they are made.

`state` is always there: finished (every step trained and, unless turned off, evaluated), stopped
(on request: resume it) or failed (`reason` says why, `errors` has the details).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

STATES = ("finished", "stopped", "failed")
MAX_CURVE_POINTS = 400  # loss-curve points per chunk kept in metrics.json; curves.jsonl has every step


@dataclass(kw_only=True)
class Metrics:
    config: dict[str, Any]
    state: str
    reason: str = ""  # why the run did not finish ("" when it did)
    steps_done: int = 0  # optimizer steps every stage completed
    final_steps: list[int] = field(default_factory=list)  # the step each chunk's final/ weights are from
    eval: dict[str, Any] | None = None  # `eval_record` of the final weights
    eval_skipped: str = ""  # why there is no eval ("" when there is one)
    eval_history: list[dict[str, Any]] = field(default_factory=list)  # --eval-every, then the final eval
    throughput_samples_per_s: float = 0.0  # samples trained in this session / its training time
    bubble_fraction: float | None = None  # pipeline: 1 - mean busy / makespan
    setup_s: float = 0.0  # start to the first action (imports, loading, linking)
    wall_s: float = 0.0  # the training itself
    eval_s: float = 0.0  # the final eval
    total_s: float = 0.0  # start to this record, as the user waited for it
    downtime_s: float = 0.0  # outages (failure to recovered)
    per_stage: list[dict[str, Any]] = field(default_factory=list)  # each stage's report + activity
    curves: list[dict[str, Any]] = field(default_factory=list)  # loss curves per chunk (summarised: see curves_note)
    curves_note: str = ""  # how the curves were summarised ("" when every step is there)
    layers: list[list[int]] = field(default_factory=list)  # each chunk's [first, end) layers
    threads: int | None = None  # torch threads per computing process
    errors: dict[str, str] = field(default_factory=dict)  # who failed -> what it said
    recovery: list[dict[str, Any]] = field(default_factory=list)  # one record per recovered failure
    restarts: list[int] = field(default_factory=list)  # replacements per stage
    failures_not_injected: list[dict[str, Any]] = field(default_factory=list)
    stragglers: list[dict[str, Any]] = field(default_factory=list)  # `--fail S@N:slow=X` that fired (no recovery)
    checkpoint_rejections: list[dict[str, Any]] = field(default_factory=list)
    resumed_from_step: int | None = None  # where this session of the run began
    resumable_from_step: int | None = None  # where `--resume` would continue (the newest common checkpoint)
    telemetry_note: str = ""  # how events and trace were bounded on a long run

    def __post_init__(self) -> None:
        assert self.state in STATES, self.state

    # ---- what readers ask -----------------------------------------------------------------------
    @property
    def total_steps(self) -> int:
        return int(self.config.get("train", {}).get("steps", 0))

    @property
    def method(self) -> str:
        return str(self.config.get("train", {}).get("method", "?"))

    @property
    def runtime(self) -> str:
        return str(self.config.get("train", {}).get("runtime", "?"))

    @property
    def training_complete(self) -> bool:
        """Every step trained and every chunk's final weights from the last step (only the eval may lack)."""
        n = self.total_steps
        return n > 0 and self.steps_done >= n and bool(self.final_steps) and min(self.final_steps) >= n

    @property
    def headline_accuracy(self) -> float | None:
        """The accuracy a run's views show (shown_accuracy): label accuracy, or per-token for a response task."""
        return None if self.eval is None else shown_accuracy(self.eval)[1]

    # ---- JSON -----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Metrics":
        """A metrics.json of this version or an earlier one (the only place old shapes are read)."""
        d = dict(d)
        d.setdefault("config", {})
        d.setdefault("state", "finished")  # the reference trainer wrote none: it only ever finished
        if "throughput_samples_per_s" not in d and "samples_per_s" in d:
            d["throughput_samples_per_s"] = d["samples_per_s"]
        if "curves" not in d and isinstance(d.get("train"), dict):
            d["curves"] = d["train"].get("curves", [])
        if d.get("eval_skipped") is None:
            d["eval_skipped"] = ""
        if d.get("reason") is None:
            d["reason"] = ""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def small(self, why: str) -> "Metrics":
        """The same record without its bulky parts (a full disk); `why` says so."""
        return dataclasses.replace(self, per_stage=[], curves=[], eval_history=[], checkpoint_rejections=[],
                                   errors={k: v[:2000] for k, v in self.errors.items()}, telemetry_note=why)


def shown_accuracy(e: dict[str, Any]) -> tuple[str, float | None]:
    """The accuracy a view shows for an eval (the model's or one chunk's): label accuracy for a
    classification, per-token accuracy for a prompt -> response task (it has no labels)."""
    if e.get("label_accuracy") is not None:
        return "label accuracy", e["label_accuracy"]
    return "token accuracy", e.get("token_accuracy")


def eval_record(per_chunk: list[dict[str, Any]], generation: dict[str, Any] | None = None) -> dict[str, Any]:
    """The eval part of a record: the last chunk's numbers (the model's) and every chunk's; `generation`:
    the whole model's exact match of greedy generation (a response task's final eval, generation_eval.py)."""
    last = per_chunk[-1]
    return {"accuracy": last["accuracy"], "label_accuracy": last["label_accuracy"],
            "token_accuracy": last.get("token_accuracy"), "nll": last["nll"], "examples": last["examples"],
            "labels": last.get("labels"),
            **(generation or {}), "per_chunk": [{"chunk": k, **m} for k, m in enumerate(per_chunk)]}
