"""`zerolock bench hetero` (issue 29, the paper's E3 on uneven devices): throughput of a pipeline whose
middle stage is slower (`--stage-speed 1,0.4,1`: 2.5x), with the even chunk boundaries and with
`--boundaries auto` (balance.py), ZeroLock and 1F1B side by side, and each stage's busy vs idle seconds
(the paper's Fig. 8a: active vs wait). Every cell is a real run, the four run round-robin (`--repeats`)."""

from __future__ import annotations

import argparse
from typing import Any

from zerolock_core.config.arg_types import floats_arg
from zerolock_core.method.balance import AUTO
from zerolock_core.config.run_config import replace
from zerolock_core.rundir.run_dir import RunDir

from .common.experiment import Experiment
from .common.measure import measured
from .common.pipeline_runs import PipelineRuns
from .common.settings import BenchSettings, report_header
from .common.table import joined, markdown_table, preamble

SPLITS = {"even": None, "balanced": AUTO}
LAYER_COSTS = {"F": 1.0, "L": 2.0, "B": 2.0}  # the simulator's layer: a forward 1, a backward 2 (balance.py's model)


def simulated_samples_per_s(method: str, *, layers: list[list[int]], speeds: tuple[float, ...], batch: int,
                            microbatches: int, steps: int) -> float:
    """The simulator's samples per modelled second on stages holding `layers`, every layer costing LAYER_COSTS
    at speed 1 (no link, no readout): what balancing the chunks can gain, bubbles included."""
    from zerolock_core.schedule import Costs, LinkProfile, build_schedule, simulate

    per_stage = {s: {kind: c * (end - first) for kind, c in LAYER_COSTS.items()}
                 for s, (first, end) in enumerate(layers)}
    result = simulate(build_schedule(method, stages=len(layers), microbatches=microbatches, windows=steps),
                      costs=Costs(per_stage=per_stage, step=0.0, speeds=speeds), link=LinkProfile())
    return steps * batch / result.makespan_s


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
        balance = RunDir(o.dir).read_balance()  # what `auto` measured (None for the even split)
        rows.append({"method": method, "split": split, "layers": o.metrics.layers, **row,
                     "balance": None if balance is None else {
                         k: balance[k] for k in ("boundaries", "stage_s", "measured")},
                     "busy_s": [s["busy_s"] for s in o.per_stage], "idle_s": [s["idle_s"] for s in o.per_stage],
                     "simulated_per_layer_s": simulated_samples_per_s(
                         method, layers=o.metrics.layers, speeds=speeds, batch=batch, microbatches=microbatches,
                         steps=settings.steps)})

    def gain(key: str) -> dict[str, float]:
        return {m: by["balanced"] / by["even"] for m in methods
                if (by := {r["split"]: r[key] for r in rows if r["method"] == m})}
    return {**report_header("hetero", settings),
            "config": {"stages": stages, "batch": batch, "microbatches": microbatches, "speeds": list(speeds)},
            "rows": rows, "balanced_over_even": gain("samples_per_s"),
            "balanced_over_even_simulated": gain("simulated_per_layer_s")}


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = preamble(report, f"K={c['stages']}, b={c['batch']}, m={c['microbatches']}, stage speeds "
                             f"{joined(c['speeds'])}; samples/s after the first window")
    lines.append(markdown_table(
        ["method", "boundaries", "layers", "samples/s", "busy s per stage", "idle s per stage", "active fraction"],
        [[r["method"], r["split"], " ".join(f"{a}-{b}" for a, b in r["layers"]), f"{r['samples_per_s']:.1f}",
          joined(r["busy_s"]), joined(r["idle_s"]), joined(r["active_fraction"])] for r in report["rows"]]))
    for r in report["rows"]:
        if r.get("balance"):  # files written before `auto` measured its costs have none
            m = r["balance"]["measured"]
            lines.append(f"{r['method']} `auto` measured per micro-batch ({m['rows']} rows x {m['seq_len']} tokens): "
                         f"a layer {m['layer_s'][0] * 1e3:.2f} ms (each on its own "
                         f"{min(m['each_layer_s']) * 1e3:.2f}-{max(m['each_layer_s']) * 1e3:.2f}), the head "
                         f"{m['head_s'] * 1e3:.2f} ms, the upstream head's forward {m['upstream_head_s'] * 1e3:.2f} ms, "
                         f"the embedding {m['embedding_s'] * 1e3:.2f} ms; modelled stage times "
                         f"{joined([t * 1e3 for t in r['balance']['stage_s']])} ms")
    for label, key in (("measured", "balanced_over_even"), ("simulated, a layer costing F 1, backward 2, no link",
                                                            "balanced_over_even_simulated")):
        if key in report:  # files written before the simulated column have only the measured gain
            lines.append(f"balanced / even samples/s, {label}: "
                         + ", ".join(f"{m} {g:.2f}x" for m, g in report[key].items()))
    return "\n".join(lines)


EXPERIMENT = Experiment(name="hetero", run=run_hetero, format_report=format_report,
                        shape={"stages": 3}, defaults={"methods": ("zerolock", "1f1b")},
                        arguments=lambda a, out: dict(speeds=a.speeds))


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--speeds", type=floats_arg, default=(1.0, 0.4, 1.0),
                   help="each stage's speed in (0, 1], one per stage (default: a 2.5x slower middle stage)")
