"""`zerolock bench efficiency`: how close each method gets to the ideal pipeline.

* efficiency = measured throughput ÷ the bound set by the slowest stage: micro-batch size ÷ that
  stage's compute seconds per micro-batch (F + L or B, plus its share of STEP), all read from the
  same run's events, after the first window;
* bubble fraction (1 − mean compute ÷ span) beside the textbook formulas: GPipe (K−1)/(m+K−1) of
  the span; 1F1B (K−1)/m of the ideal compute time, compared with the measured idle ÷ compute.
  The formulas assume uniform stages and free communication; PipeDream and ZeroLock have no
  per-window flush, so no textbook bubble is printed for them.
"""

from __future__ import annotations

from typing import Any

from zerolock_core.schedule import textbook_bubble
from zerolock_core.schedule.spans import (busy_per_stage, compute_per_microbatch, spans_from_events, throughput,
                                          window_start)
from .common import plots
from .common.machine import oversubscribed
from .common.measure import skip_windows
from .common.experiment import Experiment
from .common.pipeline_runs import PipelineRuns, RunOutcome
from .common.settings import METHODS, BenchSettings, report_header
from .common.table import joined, markdown_table, preamble


def efficiency_of(o: RunOutcome, *, stages: int, batch: int, microbatches: int, steps: int) -> dict[str, Any]:
    spans = spans_from_events(o.events)
    skip = skip_windows(steps)
    start = window_start(spans, microbatches=microbatches, skip_windows=skip)
    end = max(s.t1 for s in spans)
    counted = (steps - skip) * microbatches
    per_mb = compute_per_microbatch(spans, stages=stages, microbatches_counted=counted, skip_before=start)
    slowest = max(range(stages), key=lambda s: per_mb[s])
    bound = (batch // microbatches) / per_mb[slowest]
    tput = throughput(spans, batch=batch, microbatches=microbatches, windows=steps, skip_windows=skip)
    busy = busy_per_stage(spans, skip_before=start)
    mean_busy = sum(busy.get(s, 0.0) for s in range(stages)) / stages
    bubble = 1.0 - mean_busy / (end - start)
    method = o.cfg.train.method
    textbook = textbook_bubble(method, stages, microbatches) if method in ("gpipe", "1f1b") else None
    return {
        "samples_per_s": tput,
        "bound_samples_per_s": bound,
        "efficiency": tput / bound,
        "slowest_stage": slowest,
        "compute_per_microbatch_s": per_mb,
        "bubble_fraction": bubble,
        "idle_over_compute": bubble / (1.0 - bubble) if bubble < 1 else None,
        "textbook_bubble": textbook,
        "textbook_formula": {"gpipe": "(K-1)/(m+K-1) of the span", "1f1b": "(K-1)/m of ideal compute"}.get(method),
        "run": str(o.dir),
    }


def run_efficiency(settings: BenchSettings, *, runs: PipelineRuns, stages: int, batch: int, microbatches: int,
                   methods: tuple[str, ...] = METHODS) -> dict[str, Any]:
    geometry = dict(stages=stages, batch=batch, microbatches=microbatches)
    outcomes = runs.outcomes([settings.pipeline(method=m, **geometry, out=runs.root) for m in methods])
    return {
        **report_header("efficiency", settings),
        "config": {**geometry, "oversubscribed": oversubscribed(stages=stages, threads=settings.threads,
                                                                device=settings.device)},
        "results": {m: efficiency_of(o, **geometry, steps=settings.steps) for m, o in zip(methods, outcomes)},
    }


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = preamble(report, f"K={c['stages']}, b={c['batch']}, m={c['microbatches']}; after the first window" + (
        "; OVERSUBSCRIBED: stages share cores, compute times include waiting for a core" if c["oversubscribed"] else ""))
    rows = []
    for m, r in report["results"].items():
        measured_vs = r["idle_over_compute"] if m == "1f1b" else r["bubble_fraction"]
        rows.append([m, f"{r['samples_per_s']:.1f}", f"{r['bound_samples_per_s']:.1f} (stage {r['slowest_stage']})",
                     f"{r['efficiency']:.1%}", joined([x * 1e3 for x in r["compute_per_microbatch_s"]], ".1f", " / "),
                     f"{r['bubble_fraction']:.1%}",
                     f"{measured_vs:.1%} vs {r['textbook_bubble']:.1%}" if r["textbook_bubble"] is not None else "—"])
    lines.append(markdown_table(["method", "samples/s", "bound (slowest stage)", "efficiency",
                                 "compute ms/mb per stage", "bubble (of span)", "measured vs textbook"], rows))
    lines.append("textbook: GPipe (K-1)/(m+K-1) compared with the bubble of the span; 1F1B (K-1)/m compared with "
                 "measured idle ÷ compute.")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    res, c = report["results"], report["config"]
    column = lambda key: [r[key] for r in res.values()]  # noqa: E731
    bound = plots.figure(
        [plots.method_bars("measured", list(res), column("samples_per_s")),
         plots.method_bars("slowest-stage bound", list(res), column("bound_samples_per_s"), estimate=1)],
        barmode="group", yaxis_title="samples/s",
        title=f"Throughput against the slowest-stage bound, K={c['stages']}, b={c['batch']}, m={c['microbatches']}")
    bubble = plots.figure(
        [plots.method_bars("measured bubble", list(res), column("bubble_fraction")),
         plots.method_bars("textbook", list(res), column("textbook_bubble"), estimate=1)],
        barmode="group", yaxis_title="fraction", title="Bubble fraction: measured vs textbook")
    return {"efficiency_bound": bound, "efficiency_bubble": bubble}


EXPERIMENT = Experiment(name="efficiency", run=run_efficiency, figures=figures, format_report=format_report)
register = EXPERIMENT.register
