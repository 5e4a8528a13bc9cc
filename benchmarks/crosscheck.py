"""`zerolock bench crosscheck`: our GPipe / 1F1B / ZB-H1 against torch.distributed.pipelining's own
ScheduleGPipe / Schedule1F1B / ScheduleInterleavedZeroBubble (one stage per rank) on the same model split, micro-batches and initial weights
(gloo, CPU, 2 stages, one spawned process per stage). Losses must agree; throughput side by side.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch.multiprocessing as mp

from zerolock_core.rundir.loss_curves import full_curves
from zerolock_core.viz.palette import estimate_colour, method_colour
from zerolock_core.schedule import RECV_KINDS, SEND_KINDS
from zerolock_core.schedule.spans import busy_per_stage, spans_from_events, throughput, window_start
from .common import plots
from .common.crosscheck_worker import SCHEDULES, run_rank
from .common.machine import free_port
from .meter_overhead import meter_overhead
from .common.experiment import Experiment
from .common.pipeline_runs import PipelineRuns
from .common.settings import BenchSettings, report_header
from .common.table import markdown_table, pct, preamble

LOSS_RTOL = 1e-4


def run_torch_pipelining(settings: BenchSettings, *, batch: int, microbatches: int, out: Path,
                         timeout_s: float = 600.0) -> dict[str, Any]:
    """Every torch schedule in one pair of spawned ranks; per schedule: losses, step end times."""
    cfg = settings.pipeline(method="gpipe", stages=2, batch=batch, microbatches=microbatches, out=out)
    out.mkdir(parents=True, exist_ok=True)
    ctx, port = mp.get_context("spawn"), free_port()
    procs = [ctx.Process(target=run_rank, args=(r, cfg.to_dict(), port, str(out), SCHEDULES),
                         name=f"torch-pipelining-rank{r}") for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout_s)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    codes = [p.exitcode for p in procs]
    if codes != [0, 0]:
        raise RuntimeError(f"torch.distributed.pipelining ranks exited with {codes}")
    ranks = [json.loads((out / f"torch_pipelining_rank{r}.json").read_text()) for r in range(2)]
    return {name: {"losses": ranks[1][name]["losses"], "total_s": max(r[name]["total_s"] for r in ranks),
                   "step_end_s": [max(ends) for ends in zip(*(r[name]["step_end_s"] for r in ranks))]}
            for name in SCHEDULES}


def _ours_breakdown(events: list[dict[str, Any]], *, stages: int, microbatches: int, skip: int) -> dict[str, float]:
    """Where our stages' time goes after the skipped windows, seconds per stage (mean over stages)."""
    spans = spans_from_events(events)
    start = window_start(spans, microbatches=microbatches, skip_windows=skip)
    span = max(s.t1 for s in spans) - start
    busy = busy_per_stage(spans, skip_before=start)
    comm = {st: sum(s.seconds for s in spans if s.t0 >= start and s.stage == st and s.kind in SEND_KINDS | RECV_KINDS)
            for st in range(stages)}
    return {
        "span_s": span,
        "compute_s": sum(busy.values()) / stages,
        "send_recv_actions_s": sum(comm.values()) / stages,
        "between_actions_s": sum(span - busy.get(st, 0.0) - comm[st] for st in range(stages)) / stages,
    }


def run_crosscheck(settings: BenchSettings, *, out: Path, runs: PipelineRuns, batch: int,
                   microbatches: int) -> dict[str, Any]:
    if settings.device != "cpu":
        raise ValueError("the torch.distributed.pipelining cross-check runs on CPU (gloo) only")
    if settings.steps < 2:
        raise ValueError("--steps must be at least 2: throughput is also given without the first step")
    skip, steps = 1, settings.steps
    geometry = dict(batch=batch, microbatches=microbatches)
    ours_cfgs = [settings.pipeline(method=n, stages=2, **geometry, out=out) for n in SCHEDULES]
    tries = []
    for r in range(runs.repeats):  # theirs and ours alternate, so other work on the machine hits both alike
        tries.append(run_torch_pipelining(settings, **geometry, out=out / "torch_pipelining" / f"r{r}"))
        runs.run_round(ours_cfgs, r)
    theirs = {name: max((t[name] for t in tries), key=lambda x: -x["total_s"]) for name in SCHEDULES}
    for name in SCHEDULES:
        if any(t[name]["losses"] != theirs[name]["losses"] for t in tries):
            raise RuntimeError(f"torch.distributed.pipelining {name}: repeats gave different losses")
    rows: dict[str, Any] = {}
    for name, cfg in zip(SCHEDULES, ours_cfgs):
        ours, t = runs.run(cfg), theirs[name]
        spans = spans_from_events(ours.events)
        our_losses = full_curves(ours.dir, ours.metrics.curves)[0]["loss"]
        diffs = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(our_losses, t["losses"])]
        their_steady = (steps - skip) * batch / (t["step_end_s"][-1] - t["step_end_s"][skip - 1])
        our_steady = throughput(spans, **geometry, windows=steps, skip_windows=skip)
        rows[name] = {
            "ours_losses": our_losses,
            "torch_losses": t["losses"],
            "max_rel_loss_diff": max(diffs) if diffs else None,
            "losses_agree": bool(diffs) and max(diffs) <= LOSS_RTOL and len(our_losses) == len(t["losses"]),
            "ours_samples_per_s": throughput(spans, **geometry, windows=steps, skip_windows=0),
            "torch_samples_per_s": steps * batch / t["total_s"],
            "ours_steady_samples_per_s": our_steady,
            "torch_steady_samples_per_s": their_steady,
            "torch_total_s_every_repeat": [t[name]["total_s"] for t in tries],
            "ours_vs_torch_steady": our_steady / their_steady - 1.0,
            "ours_time_breakdown": _ours_breakdown(ours.events, stages=2, microbatches=microbatches, skip=skip),
            "ours_run": str(ours.dir),
        }
    return {
        **report_header("crosscheck", settings),
        "config": {"stages": 2, **geometry, "steps": steps, "loss_rtol": LOSS_RTOL, "steady_skips_windows": skip},
        "stage_inputs": "attention mask closed over per micro-batch from each stage's own data "
        "(as our engine does); labels passed as the schedule's target",
        "results": rows,
        "meter_overhead": meter_overhead(settings, **geometry),
    }


def explain(report: dict[str, Any]) -> list[str]:
    lines = []
    for name, r in report["results"].items():
        gap, b = r["ours_vs_torch_steady"], r["ours_time_breakdown"]
        if gap < 0:
            lines.append(
                f"{name}: ours is {-gap:.1%} slower than torch's in steady state. Per stage, of our "
                f"{b['span_s'] * 1e3:.1f} ms span, {b['compute_s'] * 1e3:.1f} ms is compute, "
                f"{b['send_recv_actions_s'] * 1e3:.1f} ms is in send/receive actions (posting, waiting "
                f"for the peer) and {b['between_actions_s'] * 1e3:.1f} ms is between actions "
                "(event writing, flow-control and stop checks in the store, Python dispatch).")
        else:
            lines.append(f"{name}: ours is {gap:.1%} faster than torch's in steady state.")
    mo = report.get("meter_overhead")
    if mo:
        lines.append(
            f"our activation meter (a Python hook on every saved tensor, which torch's stages do not run) costs "
            f"{mo['overhead']:+.1%} on a chunk's forward + backward here ({mo['plain_s'] * 1e3:.1f} -> "
            f"{mo['metered_s'] * 1e3:.1f} ms).")
    return lines


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    head = preamble(report, f"K=2, b={c['batch']}, m={c['microbatches']}, {c['steps']} steps; steady state skips the "
                            "first step")
    rows = [[name, "yes" if r["losses_agree"] else "NO", f"{r['max_rel_loss_diff']:.1e}",
             *(f"{r[k]:.1f}" for k in ("ours_samples_per_s", "torch_samples_per_s", "ours_steady_samples_per_s",
                                       "torch_steady_samples_per_s")),
             pct(r["ours_vs_torch_steady"])]
            for name, r in report["results"].items()]
    table = markdown_table(["schedule", "loss agrees", "max rel diff", "ours samples/s", "torch samples/s",
                            "ours steady", "torch steady", "ours vs torch (steady)"], rows)
    return "\n".join(head + [table, *explain(report)])


def figures(report: dict[str, Any]):
    res = report["results"]
    traces = []
    for name, r in res.items():  # a schedule: its method's colour, torch's the fainter estimate
        steps, colour = list(range(1, len(r["ours_losses"]) + 1)), method_colour(name)
        traces += [plots.curve(f"ours {name}", steps, r["ours_losses"], color=colour),
                   plots.curve(f"torch {name}", steps, r["torch_losses"], color=estimate_colour(colour, 1),
                               mode="markers", marker={"symbol": "x", "size": 12})]
    loss = plots.figure(
        traces, title="Training loss per step: ours vs torch.distributed.pipelining", xaxis_title="step",
        yaxis_title="task cross-entropy")
    tput = plots.figure(
        [plots.method_bars(label, list(res), [r[key] for r in res.values()], estimate=i) for i, (label, key) in
         enumerate((("ours", "ours_steady_samples_per_s"),
                    ("torch.distributed.pipelining", "torch_steady_samples_per_s")))],
        title=f"Steady-state throughput, K=2 ({report['machine']})", yaxis_title="samples/s", barmode="group")
    return {"crosscheck_loss": loss, "crosscheck_throughput": tput}


EXPERIMENT = Experiment(
    name="crosscheck", run=run_crosscheck, figures=figures, format_report=format_report, steps=6, out=True,
    shape={"stages": None, "methods": False},  # K = 2: what torch.distributed.pipelining's schedules share
    succeeded=lambda report: all(r["losses_agree"] for r in report["results"].values()))
register = EXPERIMENT.register
