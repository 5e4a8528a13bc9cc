"""The one runner of `zerolock bench NAME`: flags → settings → runs → report → JSON + figures + table.

An experiment module says only what differs: its own flags, the keywords its `run_*` function
takes from them, its figures and its table (`Experiment`). The runner owns the rest: the common
flags and `BenchSettings` (settings.py), the pipeline geometry flags, the results directory, the
repeats of every pipeline config (`PipelineRuns`), the machine and load recorded in the report
(`report_header`), and writing NAME.json with its figures (`publish`).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .publish import publish
from .runs import PipelineRuns
from .settings import METHODS, BenchSettings, ints_arg, methods_arg, results_dir, settings_from_args

Report = dict[str, Any]


@dataclass(kw_only=True, frozen=True)
class Experiment:
    name: str  # results/NAME-<time>/NAME.json
    run: Callable[..., Report]  # run(settings, **arguments(a, out)) -> the report
    arguments: Callable[[argparse.Namespace, Path], dict[str, Any]]  # its flags -> run's keywords
    figures: Callable[[Report], dict[str, Any]]
    format_report: Callable[[Report], str]
    succeeded: Callable[[Report], bool] = lambda report: True  # the exit code: 0, or 1 when False


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


def shape(a: argparse.Namespace) -> dict[str, Any]:
    """The geometry flags `add_shape_flags` gave, as keywords."""
    return {k: getattr(a, k) for k in ("stages", "batch", "microbatches", "methods") if hasattr(a, k)}


def pipeline_runs(a: argparse.Namespace, out: Path, *, repeats: bool = True) -> PipelineRuns:
    """Where the experiment's pipeline runs go; `repeats=False` for a deterministic outcome
    (memory peaks, OOM, accuracy), where --repeats would change nothing."""
    return PipelineRuns(out, repeats=a.repeats if repeats else 1)


def register_experiment(p: argparse.ArgumentParser, e: Experiment) -> None:
    p.set_defaults(func=lambda a: run_experiment(e, a))


def run_experiment(e: Experiment, a: argparse.Namespace) -> int:
    settings: BenchSettings = settings_from_args(a)
    out = results_dir(e.name, a.out)
    report = e.run(settings, **e.arguments(a, out))
    out.mkdir(parents=True, exist_ok=True)
    print(publish(report, out=out, name=e.name, figures=e.figures, format_report=e.format_report, png=not a.no_png))
    return 0 if e.succeeded(report) else 1
