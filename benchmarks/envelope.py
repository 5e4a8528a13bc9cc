"""`zerolock bench envelope`: the largest physical batch b each method fits under a memory budget,
with m fixed (the paper: "OOM at b = 10 / 20 / 20 (GPipe, 1F1B, PipeDream) vs 28 (ZeroLock)", m=4).

The engine enforces `--memory-budget` per stage on the measured activation bytes (on CPU; a CUDA
out-of-memory error counts too). b runs over multiples of m (the engine needs m | b); the search
probes b = m, then the b at which the activations measured so far would reach the budget if they
grew linearly, then bisects between the largest b that fitted and the smallest that did not.
Every probe is a real run; the report lists them all.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any, Callable

from zerolock_core.config.arg_types import bytes_arg
from .common import paper, plots
from .common.experiment import Experiment
from .common.pipeline_runs import PipelineRuns
from .common.settings import METHODS, BenchSettings, report_header
from .common.table import markdown_table, mib, preamble


@dataclass(kw_only=True, frozen=True)
class Probe:
    multiple: int  # b = multiple * m
    batch: int
    fits: bool
    max_activation_bytes: int | None  # None when the run stopped over budget
    error: str | None = None


def search_largest(probe: Callable[[int], Probe], *, budget_bytes: int, max_multiple: int) -> tuple[int, list[Probe]]:
    """Largest multiple j in [1, max_multiple] that fits (0 if none); every probe made, in order.
    Assumes fitting is monotone in b (activations grow with b)."""
    if max_multiple < 1:
        raise ValueError(f"the largest batch must be at least m (got {max_multiple} multiples)")
    tried: dict[int, Probe] = {}
    lo, hi = 0, max_multiple + 1  # lo fits (0 trivially); hi is taken not to fit
    j = 1
    while hi - lo > 1:
        tried[j] = p = probe(j)
        lo, hi = (j, hi) if p.fits else (lo, j)
        if hi - lo <= 1:
            break
        peak = tried[lo].max_activation_bytes if lo else None
        guess = int(budget_bytes * lo / peak) if peak else (lo + hi) // 2
        j = min(max(guess, lo + 1), hi - 1)
        if j in tried:
            j = (lo + hi) // 2
    return lo, list(tried.values())


def run_envelope(settings: BenchSettings, *, runs: PipelineRuns, stages: int, microbatches: int, budget_bytes: int,
                 max_batch: int, methods: tuple[str, ...] = METHODS) -> dict[str, Any]:
    if budget_bytes <= 0:
        raise ValueError(f"--memory-budget must be positive (got {budget_bytes})")
    if max_batch < microbatches:
        raise ValueError(f"--max-batch {max_batch} is smaller than --microbatches {microbatches}")
    most = max_batch // microbatches
    res: dict[str, Any] = {}
    for method in methods:

        def probe(j: int, method: str = method) -> Probe:
            o = runs.run(settings.pipeline(method=method, stages=stages, batch=j * microbatches,
                                           microbatches=microbatches, memory_budget_bytes=budget_bytes, out=runs.root))
            return Probe(multiple=j, batch=j * microbatches, fits=o.ok,  # ok: no error
                         max_activation_bytes=max(s["peak_activation_bytes"] for s in o.per_stage) if o.ok else None,
                         error=o.error.splitlines()[0] if o.error else None)

        largest, probes = search_largest(probe, budget_bytes=budget_bytes, max_multiple=most)
        res[method] = {"largest_batch": largest * microbatches,
                       "first_oom_batch": None if largest == most else (largest + 1) * microbatches,
                       "capped": largest == most, "probes": [asdict(p) for p in probes]}
    return {
        **report_header("envelope", settings),
        "config": {"stages": stages, "microbatches": microbatches, "budget_bytes": budget_bytes, "max_batch": max_batch,
                   "budget_applies_to": "measured activation bytes per stage"},
        "paper_oom_at_batch": paper.OOM_AT_BATCH,
        "results": res,
    }


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = preamble(report, f"K={c['stages']}, m={c['microbatches']}, budget {mib(c['budget_bytes'])} MiB of "
                             f"activations per stage, b searched up to {c['max_batch']}")
    rows = [[m, r["largest_batch"], "none up to max" if r["capped"] else r["first_oom_batch"],
             report["paper_oom_at_batch"].get(m), len(r["probes"]),
             ", ".join(f"{p['batch']}{'✓' if p['fits'] else '✗'}" for p in r["probes"])]
            for m, r in report["results"].items()]
    lines.append(markdown_table(["method", "largest b that fits", "first b OOM", "paper: OOM at b", "runs", "probes"],
                                rows))
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    res, c = report["results"], report["config"]
    fig = plots.figure(
        [plots.method_bars("ours: largest b that fits", list(res), [r["largest_batch"] for r in res.values()]),
         plots.method_bars("paper: b at OOM", list(res), [report["paper_oom_at_batch"].get(m) for m in res],
                           estimate=1)],
        barmode="group", yaxis_title="physical batch b",
        title=f"Batch envelope under {c['budget_bytes'] / 2**20:.0f} MiB of activations per stage, "
              f"K={c['stages']}, m={c['microbatches']}")
    return {"envelope": fig}


EXPERIMENT = Experiment(
    name="envelope", run=run_envelope, figures=figures, format_report=format_report, steps=2,
    shape={"stages": 3, "batch": None}, repeats=False,  # OOM is deterministic
    arguments=lambda a, out: dict(budget_bytes=a.memory_budget, max_batch=a.max_batch))


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--memory-budget", type=bytes_arg, default=32 * 2**20,
                   help="activation bytes per stage (e.g. 32MiB)")
    p.add_argument("--max-batch", type=int, default=48, help="largest b tried")
