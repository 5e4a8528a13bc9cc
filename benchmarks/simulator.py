"""`zerolock bench simulator`: the schedule simulator, fed with per-action costs measured from a
short run's own events, predicts that run; then, labelled as predictions, deeper pipelines and
slower links.

Validation (every method, every K given): the mean seconds of each compute action per stage
(after the first window; a stage's median send-posting time folded into the action before it),
the hidden-state bytes, the in-flight limit and the link feed `schedule.simulate`; predicted
throughput, in-flight micro-batches and held activation bytes (in-flight × one micro-batch's
measured bytes) are printed beside the measured ones. Oversubscribed runs (K > cores) are
labelled: their measured action times include waiting for a core, which a simulator that gives
every stage its own core cannot reproduce.

Extrapolation (PREDICTIONS, nothing is run): K in {8, 16}, m = 2K, the same micro-batch size, on
each link profile. Stage costs come from the smallest measured K: its first stage for stage 0, its
last stage for every later stage (a deeper model whose chunks are each like a measured one; for
the BP methods the middle stages are charged the last stage's loss readout, a slight pessimism
for them). The costs are the in-process probe's (`probe.py`): one measurement of F, L, B and STEP
taken at one moment for all methods, so the methods are costed alike. (On a machine shared with
other work, separate runs of different methods can see per-action times differ by 2x; the
validation above shows that, but it must not leak into a comparison of methods.) With
`--no-probe` the base is each method's own run events instead.
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from zerolock_core.config.arg_types import ints_arg
from zerolock_core.methods import LOCAL_METHODS
from zerolock_core.viz.palette import dash, method_colour
from zerolock_core.runtime.link_emulation import link_for
from zerolock_core.schedule import LINK_PROFILES, Costs, Kind, build_schedule, schedulable, simulate
from zerolock_core.schedule.spans import (activation_per_microbatch, costs_from_spans, held_activation_peak, mean_costs,
                                          spans_from_events, throughput, window_start)
from .common import plots
from .common.comparison import BASELINES
from .common.machine import oversubscribed
from .common.measure import depth_cases, skip_windows
from .common.prediction import predict
from .common.probe import probe_costs, probed_stage_costs
from .common.experiment import Experiment
from .common.pipeline_runs import PipelineRuns
from .common.settings import METHODS, BenchSettings, report_header
from .common.table import markdown_table, mib, pct, preamble

TOLERANCE = 0.10
EXTRAPOLATE_LINKS = ("ideal", "local", "wifi", "mobile", "constrained")


def stage_costs(method: str, hidden_bytes: int, per_stage: Any) -> Costs:
    """Costs from `per_stage` alone (no defaults); BP methods send a gradient as large as each hidden state."""
    return Costs(forward=0.0, local=0.0, backward=0.0, step=0.0, hidden_bytes=hidden_bytes,
                 grad_bytes=0 if method in LOCAL_METHODS else hidden_bytes, per_stage=per_stage)


def validate_one(settings: BenchSettings, runs: PipelineRuns, *, method: str, stages: int, batch: int,
                 microbatches: int, probe: dict[int, dict[str, float]] | None,
                 ) -> tuple[dict[str, Any], dict[int, dict[str, float]], int]:
    """(the comparison row, the run's mean per-action costs, its hidden-state bytes)"""
    o = runs.run(settings.pipeline(method=method, stages=stages, batch=batch, microbatches=microbatches, out=runs.root))
    steps, skip = settings.steps, skip_windows(settings.steps)
    spans = spans_from_events(o.events)
    start = window_start(spans, microbatches=microbatches, skip_windows=skip)
    hidden = max((e["sent"] for e in o.events if e["kind"] == Kind.SF), default=0)
    grad = 0 if method in LOCAL_METHODS else hidden
    costs = costs_from_spans(spans, stages=stages, hidden_bytes=hidden, grad_bytes=grad, skip_before=start)
    forecast = partial(predict, method=method, stages=stages, batch=batch, microbatches=microbatches, windows=steps,
                       link=link_for(o.cfg.link), inflight_limit=settings.inflight_depth, skip_windows=skip)
    pred = forecast(costs=costs)
    measured = throughput(spans, batch=batch, microbatches=microbatches, windows=steps, skip_windows=skip)
    per_mb = activation_per_microbatch(o.events, stages)
    row = {
        "method": method,
        "stages": stages,
        "oversubscribed": oversubscribed(stages=stages, threads=settings.threads, device=settings.device),
        "measured_samples_per_s": measured,
        "predicted_samples_per_s": pred.samples_per_s,
        "error": pred.samples_per_s / measured - 1.0 if measured else None,
        "measured_inflight": [s["peak_inflight_microbatches"] for s in o.per_stage],
        "predicted_inflight": list(pred.inflight_peak),
        "measured_held_activation_bytes": held_activation_peak(o.events, stages),
        "predicted_held_activation_bytes": [n * a for n, a in zip(pred.inflight_peak, per_mb)],
        "measured_meter_peak_bytes": [s["peak_activation_bytes"] for s in o.per_stage],
        "costs_s": {str(s): c for s, c in costs.per_stage.items()},
        "run": str(o.dir),
    }
    row["inflight_exact"] = row["measured_inflight"] == row["predicted_inflight"]
    row["within_tolerance"] = row["error"] is not None and abs(row["error"]) <= TOLERANCE
    if probe is not None:
        pp = forecast(costs=stage_costs(method, hidden, probed_stage_costs(method, probe)))
        row["probe_predicted_samples_per_s"] = pp.samples_per_s
        row["probe_error"] = pp.samples_per_s / measured - 1.0 if measured else None
    return row, mean_costs(spans, stages=stages, skip_before=start), hidden


def extrapolate(base: dict[str, dict[int, dict[str, float]]], *, hidden_bytes: int, microbatch_size: int,
                stages: tuple[int, ...], windows: int, inflight_limit: int) -> list[dict[str, Any]]:
    """Predictions for deeper pipelines from one measured run per method (see module docstring)."""
    rows = []
    for k in stages:
        m = 2 * k
        for link_name in EXTRAPOLATE_LINKS:
            row: dict[str, Any] = {"stages": k, "microbatches": m, "batch": m * microbatch_size, "link": link_name,
                                   "samples_per_s": {}}
            for method, per_stage in base.items():
                last = max(per_stage)
                costs = stage_costs(method, hidden_bytes,
                                    lambda s, kind, ps=per_stage, last=last: ps[0 if s == 0 else last].get(kind, 0.0))
                result = simulate(build_schedule(method, stages=k, microbatches=m, windows=windows), costs=costs,
                                  link=LINK_PROFILES[link_name], inflight_limit=inflight_limit)
                row["samples_per_s"][method] = result.throughput_microbatches_per_s * microbatch_size
            z = row["samples_per_s"].get("zerolock")
            row["zerolock_vs"] = {b: z / v - 1.0 for b, v in row["samples_per_s"].items() if b != "zerolock" and z}
            rows.append(row)
    return rows


def run_simulator(settings: BenchSettings, *, runs: PipelineRuns, stages: tuple[int, ...], batch: int,
                  microbatches: int, methods: tuple[str, ...] = METHODS, extrapolate_to: tuple[int, ...] = (8, 16),
                  with_probe: bool = True) -> dict[str, Any]:
    if settings.steps < 2:
        raise ValueError("--steps must be at least 2: the first window is warm-up and is not compared")
    rows, base, hidden = [], {}, 0
    geometry = dict(batch=batch, microbatches=microbatches)
    runs.prefetch([settings.pipeline(**case, out=runs.root) for case in depth_cases(stages, methods, **geometry)])
    for k in stages:
        probe = probe_costs(settings, stages=k, **geometry).per_stage if with_probe else None
        for m in methods:
            if not schedulable(m, stages=k, microbatches=microbatches):
                continue
            row, costs, hidden_k = validate_one(settings, runs, method=m, stages=k, **geometry, probe=probe)
            rows.append(row)
            if k == min(stages):  # the base of the extrapolation: probed costs if any (see module docstring)
                base[m] = costs if probe is None else probed_stage_costs(m, probe)
                hidden = hidden_k
    extra = extrapolate(base, hidden_bytes=hidden, microbatch_size=batch // microbatches, stages=extrapolate_to,
                        windows=settings.steps, inflight_limit=settings.inflight_depth) if extrapolate_to else []
    return {
        **report_header("simulator", settings),
        "config": {
            "stages": list(stages),
            "batch": batch,
            "microbatches": microbatches,
            "tolerance": TOLERANCE,
            "extrapolate_to": list(extrapolate_to),
            "extrapolation_base_stages": min(stages),
            "extrapolation_costs_from": "events of each method's run" if not with_probe else "probe",
        },
        "validation": rows,
        "predictions": extra,
    }


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = preamble(report, f"b={c['batch']}, m={c['microbatches']}; samples/s after the first window; "
                             "* = oversubscribed")
    rows = []
    for r in report["validation"]:
        held = zip(r["measured_held_activation_bytes"], r["predicted_held_activation_bytes"])
        star = "*" if r["oversubscribed"] else ""
        rows.append([r["stages"], r["method"], f"{r['measured_samples_per_s']:.1f}{star}",
                     f"{r['predicted_samples_per_s']:.1f}", pct(r["error"]), pct(r.get("probe_error")),
                     f"{r['measured_inflight']} / {r['predicted_inflight']}" + ("" if r["inflight_exact"] else " ≠"),
                     " / ".join(f"{mib(a)}/{mib(b)}" for a, b in held)])
    lines.append(markdown_table(["K", "method", "measured", "simulated (events)", "error", "error (probe costs)",
                                 "in-flight meas / sim", "held act MiB meas/sim per stage"], rows))
    if report["predictions"]:
        lines.append(f"PREDICTIONS (simulator only, nothing run): m = 2K, every stage costed like a stage of the "
                     f"K={c['extrapolation_base_stages']} split (costs from the "
                     f"{c.get('extrapolation_costs_from', 'events of each run')}); samples/s")
        methods = list(report["predictions"][0]["samples_per_s"])
        baselines = [b for b in BASELINES if b in methods]
        prow = [[p["stages"], p["link"], *[f"{p['samples_per_s'][m]:.1f}" for m in methods],
                 *[pct(p["zerolock_vs"].get(b)) for b in baselines]] for p in report["predictions"]]
        lines.append(markdown_table(["K", "link", *methods, *[f"zerolock vs {b}" for b in baselines]], prow))
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    v = report["validation"]
    labels = [f"K={r['stages']} {r['method']}" for r in v]
    series = [("measured", "measured_samples_per_s"), ("simulated (event costs)", "predicted_samples_per_s")]
    if all("probe_predicted_samples_per_s" in r for r in v):
        series.append(("simulated (probe costs)", "probe_predicted_samples_per_s"))
    methods = [r["method"] for r in v]
    figs = {"simulator_validation": plots.figure(
        [plots.method_bars(name, labels, [r[key] for r in v], methods=methods, estimate=i)
         for i, (name, key) in enumerate(series)],
        barmode="group", yaxis_title="samples/s", title="Simulator vs measured")}
    if preds := report["predictions"]:
        methods = list(preds[0]["samples_per_s"])
        traces = []
        for j, k in enumerate(sorted({p["stages"] for p in preds})):  # a method's colour, a dash per K
            ps = [p for p in preds if p["stages"] == k]
            traces += [plots.curve(f"K={k} {m}", [p["link"] for p in ps], [p["samples_per_s"][m] for p in ps],
                                   color=method_colour(m), line={"dash": dash(j)})
                       for m in methods]
        figs["simulator_predictions"] = plots.figure(traces, yaxis_title="samples/s (PREDICTED)",
                                                     title="PREDICTION: deeper pipelines and slower links")
    return figs


EXPERIMENT = Experiment(name="simulator", run=run_simulator, figures=figures, format_report=format_report,
                        shape={"stages": (2, 3)},
                        arguments=lambda a, out: dict(extrapolate_to=a.extrapolate, with_probe=not a.no_probe))


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--extrapolate", type=ints_arg, default=(8, 16), help="K values to predict (m = 2K)")
    p.add_argument("--no-probe", action="store_true", help="skip the in-process cost probe column")
