"""`zerolock bench throughput` (paper Fig. 6a): samples/s and per-stage active fraction for
K in {2, 3, 4} (more where the model's layers allow).

Every cell is a real run. Where K stage processes have fewer cores than they need (docs/results.md's fairness rule:
they take turns and bubbles stop costing time, which flatters the BP baselines) the measured
number is labelled oversubscribed and the quoted number is the simulator's, costed with
per-action times probed in this process; `zerolock bench simulator` shows how well those
predictions match real runs where the cores suffice.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import paper, plots
from .common.comparison import advantage, advantage_table
from .common.measure import best_estimate, depth_cases, measured_blocks
from .common.experiment import Experiment
from .common.pipeline_runs import PipelineRuns
from .common.settings import METHODS, BenchSettings, report_header
from .common.table import joined, markdown_table, preamble


def run_throughput(settings: BenchSettings, *, runs: PipelineRuns, stages: tuple[int, ...], batch: int,
                   microbatches: int, methods: tuple[str, ...] = METHODS, simulate: bool = True) -> dict[str, Any]:
    cases = depth_cases(stages, methods, batch=batch, microbatches=microbatches)
    blocks = measured_blocks(settings, runs=runs, simulate=simulate, cases=cases, key="stages", names=stages)
    return {
        **report_header("throughput", settings),
        "config": {"stages": list(stages), "batch": batch, "microbatches": microbatches},
        "paper": paper.DIRECTIONS["throughput"],
        "results": {str(k): {"rows": rows, "zerolock_vs": advantage(rows)} for k, rows in blocks.items()},
    }


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = preamble(report, f"b={c['batch']}, m={c['microbatches']}; samples/s after the first "
                             "window; * = oversubscribed (more stage threads than cores): quoted = simulator")
    rows = []
    for k, block in report["results"].items():
        for r in block["rows"]:
            q, src = best_estimate(r)
            meas, pred = r.get("measured", {}), r.get("predicted", {})
            rows.append([k, r["method"], f"{meas.get('samples_per_s', 0):.1f}" + ("*" if r["oversubscribed"] else ""),
                         f"{pred['samples_per_s']:.1f}" if "predicted" in r else "—", f"{q:.1f}", src,
                         joined(meas.get("active_fraction", [])), joined(pred.get("active_fraction", []))])
    lines.append(markdown_table(["K", "method", "measured", "simulated", "quoted", "from", "active (measured)",
                                 "active (simulated)"], rows))
    lines.append("ZeroLock throughput vs baseline, measured and simulated (own core per stage):")
    lines.append(advantage_table(report["results"], "K"))
    lines.append(f"paper: {report['paper']}")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    res = report["results"]
    methods = sorted({r["method"] for b in res.values() for r in b["rows"]}, key=list(METHODS).index)
    groups = []
    for m in methods:
        rows = [(k, r) for k, b in res.items() for r in b["rows"] if r["method"] == m]
        x = [f"K={k}" + (" (measured: oversubscribed)" if r["oversubscribed"] else "") for k, r in rows]
        sim, meas = ([r.get(source, {}).get("samples_per_s") for _, r in rows] for source in ("predicted", "measured"))
        groups.append((m, x, (f"{m} simulated", sim), (f"{m} measured", meas)))
    fig = plots.bars_and_crosses(groups, "Throughput vs stages (cf. paper Fig. 6a): bars simulated (probed costs, "
                                         "a core per stage), x measured")
    act = plots.panels([f"K={k}" for k in res], shared_yaxes=True)
    for i, b in enumerate(res.values(), start=1):
        for r in b["rows"]:
            if "measured" in r:
                active = r["measured"]["active_fraction"]
                act.add_trace(plots.bar(r["method"], [f"stage {s}" for s in range(len(active))], active,
                                        method=r["method"], showlegend=i == 1), row=1, col=i)
    act.update_layout(barmode="group", yaxis_title="active fraction (measured)",
                      title="Active fraction per stage, measured (K > cores: oversubscribed)")
    return {"throughput_vs_stages": fig, "active_fraction": act}


EXPERIMENT = Experiment(name="throughput", run=run_throughput, figures=figures, format_report=format_report,
                        shape={"stages": (2, 3, 4)}, arguments=lambda a, out: dict(simulate=not a.no_simulate))


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--no-simulate", action="store_true", help="measured numbers only")
