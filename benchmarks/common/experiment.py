"""The one runner of `zerolock bench NAME`: flags → settings → runs → report → JSON + figures + table.

An experiment module says only what differs (`Experiment`): its defaults, its own flags and the
keywords its `run_*` function takes from them, its figures and its table. The runner owns the rest:
the common flags and `BenchSettings` (settings.py), the pipeline geometry flags, the results
directory, the repeats of every pipeline config (`PipelineRuns`), the machine and load recorded in
the report (`report_header`), and writing NAME.json with its figures (`publish`).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from zerolock_core.config.arg_types import ints_arg
from .publish import publish
from .pipeline_runs import PipelineRuns
from .settings import METHODS, BenchSettings, add_common_flags, methods_arg, results_dir, settings_from_args

Report = dict[str, Any]


@dataclass(kw_only=True, frozen=True)
class Experiment:
    """One `zerolock bench NAME`: what differs from the other benchmarks, nothing else."""

    name: str  # results/NAME-<time>/NAME.json
    run: Callable[..., Report]  # run(settings, **keywords) -> the report
    format_report: Callable[[Report], str]
    figures: Callable[[Report], dict[str, Any]] = lambda report: {}
    # its own flags -> run's keywords (the runner adds the geometry, `runs` and `out`)
    arguments: Callable[[argparse.Namespace, Path], dict[str, Any]] = lambda a, out: {}
    steps: int = 4  # the default --steps
    seq_len: int = 128
    shape: dict[str, Any] | None = field(default_factory=lambda: {"stages": 2})  # add_shape_flags keywords
    runs: bool = True  # run(..., runs=PipelineRuns)
    repeats: bool = True  # False for a deterministic outcome (memory peaks, OOM, accuracy): one run is enough
    out: bool = False  # run(..., out=the results directory)
    defaults: dict[str, Any] = field(default_factory=dict)  # other defaults of the common flags, e.g. lr
    succeeded: Callable[[Report], bool] = lambda report: True  # the exit code: 0, or 1 when False

    def register(self, p: argparse.ArgumentParser) -> None:
        """The common flags (and the geometry's, unless `shape` is None); the module adds its own."""
        add_common_flags(p, steps=self.steps, seq_len=self.seq_len)
        if self.shape is not None:
            add_shape_flags(p, **self.shape)
        p.set_defaults(**self.defaults, func=lambda a: run_experiment(self, a))

    def keywords(self, a: argparse.Namespace, out: Path) -> dict[str, Any]:
        """`run`'s keywords from the parsed flags."""
        common: dict[str, Any] = {k: getattr(a, k) for k in ("stages", "batch", "microbatches", "methods")
                                  if self.shape is not None and hasattr(a, k)}
        if self.runs:
            common["runs"] = PipelineRuns(out, repeats=a.repeats if self.repeats else 1)
        if self.out:
            common["out"] = out
        return {**common, **self.arguments(a, out)}


def add_shape_flags(p: argparse.ArgumentParser, *, stages: int | tuple[int, ...] | None, batch: int | None = 8,
                    microbatches: int | None = 4, methods: bool = True) -> None:
    """The pipeline geometry: K (one value, or several with a tuple default), b, m, the methods."""
    if stages is not None:
        several = isinstance(stages, tuple)
        p.add_argument("--stages", type=ints_arg if several else int, default=stages,
                       help="comma-separated K values" if several else "K, the number of stages")
    if batch is not None:
        p.add_argument("--batch", type=int, default=batch, help="b, the batch of one optimizer step")
    if microbatches is not None:
        p.add_argument("--microbatches", type=int, default=microbatches, help="m, micro-batches per step")
    if methods:
        p.add_argument("--methods", type=methods_arg, default=METHODS, help=f"from {', '.join(METHODS)}")


def run_experiment(e: Experiment, a: argparse.Namespace) -> int:
    settings: BenchSettings = settings_from_args(a)
    out = results_dir(e.name, a.out)
    report = e.run(settings, **e.keywords(a, out))
    out.mkdir(parents=True, exist_ok=True)
    print(publish(report, out=out, name=e.name, figures=e.figures, format_report=e.format_report, png=not a.no_png))
    return 0 if e.succeeded(report) else 1
