"""`zerolock bench hetero` (issue 29, the paper's E3 on uneven devices): throughput of a pipeline whose
middle stage is slower (`--stage-speed 1,0.4,1`: 2.5x), with the even chunk boundaries and with
`--boundaries auto` (balance.py), ZeroLock and 1F1B side by side, and each stage's busy vs idle seconds
(the paper's Fig. 8a: active vs wait). Every cell is a real run, the four run round-robin (`--repeats`)."""

from __future__ import annotations

import argparse
from typing import Any

from zerolock_core.arg_types import floats_arg
from zerolock_core.balance import AUTO
from zerolock_core.config import replace

from .experiment import Experiment
from .measure import measured
from .pipeline_runs import PipelineRuns
from .settings import BenchSettings, report_header
from .table import joined, markdown_table, preamble

SPLITS = {"even": None, "balanced": AUTO}


def run_hetero(settings: BenchSettings, *, runs: PipelineRuns, stages: int, batch: int, microbatches: int,
               methods: tuple[str, ...], speeds: tuple[float, ...]) -> dict[str, Any]:
    cells = [(m, split, replace(settings.pipeline(method=m, stages=stages, batch=batch, microbatches=microbatches,
                                                  out=runs.root), train={"stage_speed": speeds},
                                model={"boundaries": boundaries}))
             for m in methods for split, boundaries in SPLITS.items()]
    outcomes = runs.outcomes([cfg for *_, cfg in cells])
    rows = []
    for (method, split, _), o in zip(cells, outcomes):
        row = measured(o, batch=batch, microbatches=microbatches, steps=settings.steps)
        rows.append({"method": method, "split": split, "layers": o.metrics.layers, **row,
                     "busy_s": [s["busy_s"] for s in o.per_stage], "idle_s": [s["idle_s"] for s in o.per_stage]})
    gain = {m: by["balanced"] / by["even"] for m in methods
            if (by := {r["split"]: r["samples_per_s"] for r in rows if r["method"] == m})}
    return {**report_header("hetero", settings),
            "config": {"stages": stages, "batch": batch, "microbatches": microbatches, "speeds": list(speeds)},
            "rows": rows, "balanced_over_even": gain}


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = preamble(report, f"K={c['stages']}, b={c['batch']}, m={c['microbatches']}, stage speeds "
                             f"{joined(c['speeds'])}; samples/s after the first window")
    lines.append(markdown_table(
        ["method", "boundaries", "layers", "samples/s", "busy s per stage", "idle s per stage", "active fraction"],
        [[r["method"], r["split"], " ".join(f"{a}-{b}" for a, b in r["layers"]), f"{r['samples_per_s']:.1f}",
          joined(r["busy_s"]), joined(r["idle_s"]), joined(r["active_fraction"])] for r in report["rows"]]))
    lines.append("balanced / even samples/s: " + ", ".join(f"{m} {g:.2f}x"
                                                           for m, g in report["balanced_over_even"].items()))
    return "\n".join(lines)


EXPERIMENT = Experiment(name="hetero", run=run_hetero, format_report=format_report,
                        shape={"stages": 3}, defaults={"methods": ("zerolock", "1f1b")},
                        arguments=lambda a, out: dict(speeds=a.speeds))


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--speeds", type=floats_arg, default=(1.0, 0.4, 1.0),
                   help="each stage's speed in (0, 1], one per stage (default: a 2.5x slower middle stage)")
