"""`zerolock bench links` (paper Fig. 6b): throughput of the four methods per emulated link profile.

The transport delays every real transfer by the profile's model (bytes / bandwidth on a hop that
serialises its messages, plus latency), so the measured runs pay the link for real; BP methods
ship a gradient back for every hidden state, ZeroLock only hidden states. K defaults to 2 so the
stages have a core each; larger K is labelled oversubscribed and quoted from the simulator.
"""

from __future__ import annotations

import argparse
from typing import Any

from zerolock_core.config.run_config import LinkConfig
from zerolock_core.viz.palette import method_colour
from zerolock_core.runtime.link_emulation import link_for
from .common import paper, plots
from .common.comparison import BASELINES, advantage, advantage_table
from .common.measure import best_estimate, measured_blocks
from .common.experiment import Experiment
from .common.pipeline_runs import PipelineRuns
from .common.settings import METHODS, BenchSettings, choices_arg, report_header
from .common.table import markdown_table, preamble

PROFILES = ("local", "wifi", "mobile", "constrained")
profiles_arg = choices_arg("--profiles", PROFILES)


def run_links(settings: BenchSettings, *, runs: PipelineRuns, stages: int, batch: int, microbatches: int,
              profiles: tuple[str, ...] = PROFILES, methods: tuple[str, ...] = METHODS,
              simulate: bool = True) -> dict[str, Any]:
    cases = [dict(method=m, stages=stages, batch=batch, microbatches=microbatches, link=LinkConfig(profile=p))
             for p in dict.fromkeys(profiles) for m in methods]
    res: dict[str, Any] = {}
    for prof, rows in measured_blocks(settings, runs=runs, simulate=simulate, cases=cases, key="link",
                                      names=profiles).items():
        model = link_for(LinkConfig(profile=prof))
        res[prof] = {"bandwidth_mbps": model.bandwidth_bytes_per_s * 8 / 1e6, "latency_ms": model.latency_s * 1e3,
                     "rows": rows, "zerolock_vs": advantage(rows)}
    return {
        **report_header("links", settings),
        "config": {"stages": stages, "batch": batch, "microbatches": microbatches},
        "paper": paper.DIRECTIONS["links"],
        "results": res,
    }


def format_report(report: dict[str, Any]) -> str:
    c, res = report["config"], report["results"]
    lines = preamble(report, f"K={c['stages']}, b={c['batch']}, m={c['microbatches']}; samples/s after the first "
                             "window (measured with the link emulated on the real transfers; simulated in brackets)")
    methods = [r["method"] for r in next(iter(res.values()))["rows"]]
    rows = []
    for prof, b in res.items():
        cells = []
        for r in b["rows"]:
            meas, sim = r.get("measured", {}).get("samples_per_s"), r.get("predicted", {}).get("samples_per_s")
            star = "*" if r["oversubscribed"] else ""
            cells.append(f"{meas:.1f}{star} (sim {sim:.1f})" if sim is not None else f"{meas:.1f}{star}")
        rows.append([f"{prof} ({b['bandwidth_mbps']:.0f} Mbps, {b['latency_ms']:.0f} ms)", *cells])
    lines.append(markdown_table(["link", *methods], rows))
    lines.append("ZeroLock throughput vs baseline:")
    lines.append(advantage_table(res, "link"))
    lines.append(f"paper: {report['paper']}")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    res, c = report["results"], report["config"]
    methods = [r["method"] for r in next(iter(res.values()))["rows"]]
    groups = []
    for i, m in enumerate(methods):
        rows = [b["rows"][i] for b in res.values()]
        simulated = [r["predicted"]["samples_per_s"] for r in rows] if all("predicted" in r for r in rows) else None
        groups.append((m, list(res), (m, [best_estimate(r)[0] for r in rows]),
                       None if simulated is None else (f"{m} simulated", simulated)))
    fig = plots.bars_and_crosses(groups, f"Throughput per link profile, K={c['stages']} (cf. paper Fig. 6b); "
                                         "bars measured, x simulated")
    adv = plots.figure([plots.curve(f"vs {b}", res, [100 * r["zerolock_vs"].get(b, float("nan")) for r in res.values()],
                                    color=method_colour(b)) for b in BASELINES],
                       yaxis_title="ZeroLock throughput gain (%)", title="ZeroLock's advantage as the link slows")
    return {"links_throughput": fig, "links_advantage": adv}


EXPERIMENT = Experiment(name="links", run=run_links, figures=figures, format_report=format_report,
                        arguments=lambda a, out: dict(profiles=a.profiles, simulate=not a.no_simulate))


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--profiles", type=profiles_arg, default=PROFILES)
    p.add_argument("--no-simulate", action="store_true")
