"""`zerolock bench quality` (paper Fig. 3): accuracy and NLL over training for BP, 1F1B and ZeroLock
(α = 0.5 with both consistency directions, and α = 1), over several seeds.

Arms and where their numbers come from:
* `bp`: the single-process BP reference, evaluated every `--eval-every` steps;
* `1f1b`: the real multi-process pipeline; the engine evaluates a pipeline run at its end only, so
  its curve is the training loss per step plus the final eval (the test suite checks that 1F1B
  and GPipe reproduce the BP reference's weights, so its eval curve is BP's);
* `zerolock a=0.5 reverse` (the paper's Eq. 5), `zerolock a=0.5 forward` (the authors' code),
  `zerolock a=1` (task term only; no consistency term, so no direction): the single-process
  ZeroLock reference, which the test suite checks is bitwise equal to the pipeline.
Accuracy is strict (argmax over the whole vocabulary is the label token), label accuracy picks
among the label words only, NLL is per answer token; all at the last chunk's readout.

The default (200 steps, seq 64, lr 5e-3, 2 seeds) takes minutes on 2 cores; the paper's protocol is
`--model DIR --dataset csv:agnews.csv --seq-len 128 --steps 1250 --seeds 0,1,2 --lr 1e-4`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from zerolock_core.config.run_config import DataConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig
from zerolock_core.rundir.loss_curves import full_curves
from zerolock_core.rundir.metrics import Metrics
from zerolock_core.viz.palette import dash, method_colour, stage_colour, stage_dash
from zerolock_core.train.reference_trainer import train_reference
from zerolock_core.train.threads import DEFAULT_THREADS, threads_for
from zerolock_core.config.arg_types import ints_arg
from .common import paper, plots
from .common.presets import resolve_bench_model
from .common.experiment import Experiment
from .common.pipeline_runs import PipelineRuns
from .common.settings import BenchSettings, report_header
from .common.table import joined, markdown_table, preamble


def _arm(runtime: str = "reference", method: str = "zerolock", alpha: float = 0.5, consistency: str = "reverse",
         **extra: str) -> dict[str, Any]:
    """An arm: what differs from the single-process ZeroLock reference at α = 0.5, reverse."""
    return {"runtime": runtime, "method": method, "alpha": alpha, "consistency": consistency, **extra}


ARMS: dict[str, dict[str, Any]] = {
    "bp": _arm(method="bp"),
    "1f1b": _arm("pipeline", "1f1b"),
    "zerolock a=0.5 reverse": _arm(),
    "zerolock a=0.5 forward": _arm(consistency="forward"),
    "zerolock a=1": _arm(alpha=1.0),
    "zerolock a=0.5 mlp adapter": _arm(readout="mlp"),
    "zerolock a=0.5 affine adapter": _arm(readout="affine"),
    "zerolock a=1 affine adapter": _arm(alpha=1.0, readout="affine"),
    "zerolock a=0.5->1": _arm(alpha_ramp="linear:0.5->1"),
}
DEFAULT_ARMS = ("bp", "1f1b", "zerolock a=0.5 reverse", "zerolock a=0.5 forward", "zerolock a=1")


def arm_config(settings: BenchSettings, arm: str, *, seed: int, stages: int, batch: int, microbatches: int,
               eval_every: int, eval_size: int, out: Path, lora_targets: tuple[str, ...] = ("q_proj", "v_proj"),
               reference_threads: int = DEFAULT_THREADS, boundaries: tuple[int, ...] | None = None) -> RunConfig:
    a = ARMS[arm]
    reference = a["runtime"] == "reference"
    # one process: all the cores, unless told (two benchmarks side by side must not oversubscribe)
    threads = threads_for(reference_threads) if reference else settings.threads
    return RunConfig(
        model=ModelConfig(model=resolve_bench_model(settings.model), readout=a.get("readout", "head"),
                          lora_targets=lora_targets, boundaries=boundaries),
        data=DataConfig(dataset=settings.dataset, seq_len=settings.seq_len, eval_size=eval_size),
        objective=ObjectiveConfig(alpha=(a["alpha"],), consistency=a["consistency"],
                                  alpha_ramp=a.get("alpha_ramp", "")),
        train=TrainConfig(runtime=a["runtime"], method=a["method"], stages=stages, batch=batch,
                          microbatches=microbatches, steps=settings.steps, lr=settings.lr, seed=seed,
                          eval_every=eval_every if reference else 0, threads=threads, device=settings.device,
                          inflight_depth=settings.inflight_depth),
        out=str(out),
    )


def _curve(metrics: Metrics, run_dir: Path) -> dict[str, list[float]]:
    """eval curves (reference runs) or the final eval at the last step (pipeline runs); the training loss
    at every step (the run's curves.jsonl)."""
    hist = metrics.eval_history or [{"step": metrics.total_steps, **metrics.eval}]
    train = full_curves(run_dir, metrics.curves)[-1]
    return {
        **{key: [h[key] for h in hist] for key in ("step", "accuracy", "label_accuracy", "nll")},
        "train_step": train["step"],
        "train_loss": train["task"],
        "final_per_chunk": metrics.eval["per_chunk"],
        # label accuracy of every chunk's own readout at each eval (the last chunk's is the model's)
        "per_chunk_label_accuracy": [[c["label_accuracy"] for c in h["per_chunk"]] for h in hist if "per_chunk" in h],
    }


def _mean_sd(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def run_quality(settings: BenchSettings, *, runs: PipelineRuns, out: Path, seeds: tuple[int, ...],
                stages: tuple[int, ...] | int, batch: int, microbatches: int, eval_every: int, eval_size: int,
                arms: tuple[str, ...] = DEFAULT_ARMS, lora_targets: tuple[str, ...] = ("q_proj", "v_proj"),
                reference_threads: int = DEFAULT_THREADS, boundaries: tuple[int, ...] | None = None) -> dict[str, Any]:
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise ValueError(f"unknown quality arm(s) {unknown}; choose from {list(ARMS)}")
    stage_list = (stages,) if isinstance(stages, int) else tuple(stages)
    res: dict[str, Any] = {}
    started = time.perf_counter()
    for k in stage_list:
        for arm in arms:
            per_seed, slug = [], arm.replace(" ", "_").replace("=", "").replace(">", "")
            for seed in seeds:
                cfg = arm_config(settings, arm, seed=seed, stages=k, batch=batch, microbatches=microbatches,
                                 eval_every=eval_every, eval_size=eval_size, lora_targets=lora_targets,
                                 reference_threads=reference_threads, boundaries=boundaries,
                                 out=out / "arms" / f"K{k}-{slug}-seed{seed}")
                print(f"  K={k} {arm}, seed {seed} ({time.perf_counter() - started:.0f} s so far) ...", flush=True)
                reference = ARMS[arm]["runtime"] == "reference"
                if reference:  # a benchmark owns its results directory
                    per_seed.append(_curve(train_reference(cfg, progress=False, overwrite=True), Path(str(cfg.out))))
                else:
                    outcome = runs.run(cfg)
                    per_seed.append(_curve(outcome.metrics, outcome.dir))
            final = {m: _mean_sd([c[m][-1] for c in per_seed]) for m in ("accuracy", "label_accuracy", "nll")}
            name = arm if len(stage_list) == 1 else f"{arm} · K={k}"
            res[name] = {"arm": arm, "stages": k, "seeds": list(seeds), "curves": per_seed, "final": final,
                         "source": ARMS[arm]["runtime"]}
    return {
        **report_header("quality", settings),
        "config": {"stages": list(stage_list) if len(stage_list) > 1 else stage_list[0], "batch": batch,
                   "microbatches": microbatches, "steps": settings.steps, "eval_every": eval_every,
                   "eval_size": eval_size, "seeds": list(seeds), "lora_targets": list(lora_targets),
                   "boundaries": list(boundaries) if boundaries else "even split"},
        "wall_s": round(time.perf_counter() - started, 1),
        "paper": paper.DIRECTIONS["quality"],
        "results": res,
    }


def format_report(report: dict[str, Any]) -> str:
    c, s = report["config"], report["settings"]
    lines = preamble(
        report,
        f"dataset {s['dataset']}, model {s['model']}, K={c['stages']}, b={c['batch']}, m={c['microbatches']}, "
        f"{c['steps']} steps, lr {s['lr']}, seeds {c['seeds']}, eval on {c['eval_size'] or 'all'} examples, "
        f"LoRA on {','.join(c.get('lora_targets', []))}, chunk boundaries {c.get('boundaries', 'even split')}")
    one_seed = len(c["seeds"]) == 1  # no spread to show
    spread = lambda x: f"{x['mean']:.3f}" if one_seed else f"{x['mean']:.3f} ± {x['sd']:.3f}"  # noqa: E731
    rows = [[arm, *(spread(r["final"][m]) for m in ("accuracy", "label_accuracy", "nll")),
             joined([x["label_accuracy"] for x in r["curves"][0]["final_per_chunk"]], sep=" / ")]
            for arm, r in report["results"].items()]
    heads = ["arm", "accuracy", "label accuracy", "NLL", "label acc. per chunk (first seed)"]
    return "\n".join([*lines, markdown_table(heads, rows), f"paper: {report['paper']}"])


# (x, y, panel) of every arm's curves: eval accuracy, eval NLL, then the training loss (thin, no markers)
PANELS = (("step", "accuracy", 1), ("step", "nll", 2), ("train_step", "train_loss", 3))


def arm_styles(results: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """(colour, dash) of every arm: its method's colour; the arms of one method (most are ZeroLock's
    variants) told apart by dash, in the order they ran."""
    seen: dict[str, int] = {}
    styles = {}
    for name, r in results.items():
        method = ARMS.get(r["arm"], {}).get("method", "")  # "": an arm no longer defined (unknown colour)
        seen[method] = seen.get(method, -1) + 1
        styles[name] = (method_colour(method), dash(seen[method]))
    return styles


def figures(report: dict[str, Any]):
    fig = plots.panels(("accuracy (eval)", "NLL per answer token (eval)", "training task loss"))
    styles = arm_styles(report["results"])
    for arm, r in report["results"].items():
        color, line_dash = styles[arm]
        for j, c in enumerate(r["curves"]):
            for x, y, col in PANELS:
                line = {"dash": line_dash, "width": 1} if col == 3 else {"dash": line_dash}
                fig.add_trace(plots.curve(arm, c[x], c[y], color=color, legendgroup=arm, line=line,
                                          markers=col != 3, showlegend=j == 0 and col == 1), row=1, col=col)
    fig.update_xaxes(title_text="step")
    fig.update_layout(title=f"Quality over training, {report['settings']['dataset']} "
                            f"({len(report['config']['seeds'])} seeds; cf. paper Fig. 3)")
    return {"quality_curves": fig, "quality_per_chunk": _per_chunk_figure(report)}


def _per_chunk_figure(report: dict[str, Any]):
    """Label accuracy of every chunk's own readout over training (first seed), one panel per arm."""
    from plotly.subplots import make_subplots

    arms = [(name, r) for name, r in report["results"].items() if r["curves"][0].get("per_chunk_label_accuracy")]
    cols = min(4, max(1, len(arms)))
    rows = max(1, -(-len(arms) // cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[name for name, _ in arms] or ["(no eval history)"],
                        shared_yaxes=True)
    for i, (name, r) in enumerate(arms):
        c = r["curves"][0]
        per_step = c["per_chunk_label_accuracy"]
        chunks = len(per_step[0])
        for k in range(chunks):  # a chunk is a stage: its slate shade and dash
            fig.add_trace(plots.curve(f"chunk {k}", c["step"], [row[k] for row in per_step], legendgroup=f"chunk {k}",
                                      showlegend=i == 0, color=stage_colour(k, chunks), line={"dash": stage_dash(k)}),
                          row=i // cols + 1, col=i % cols + 1)
    fig.update_layout(title="Label accuracy of each chunk's own readout over training (first seed)",
                      height=320 * rows)
    return fig


def _arguments(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    return dict(seeds=a.seeds, eval_every=a.eval_every or max(1, a.steps // 4), eval_size=a.eval_size,
                arms=tuple(x.strip() for x in a.arms.split(",") if x.strip()),
                lora_targets=tuple(x for x in a.lora_targets.split(",") if x), reference_threads=a.reference_threads,
                boundaries=a.boundaries)


# lr 5e-3: the reference fine-tune of docs/results-quality.md, which learns the embedded task in 200 steps;
# one run of each pipeline config: accuracy is deterministic
EXPERIMENT = Experiment(name="quality", run=run_quality, figures=figures, format_report=format_report,
                        arguments=_arguments, steps=200, seq_len=64, defaults={"lr": 5e-3},
                        shape={"stages": (3,), "methods": False}, repeats=False, out=True)


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--seeds", type=ints_arg, default=(0, 1))
    p.add_argument("--eval-every", type=int, default=0, help="0 = steps // 4")
    p.add_argument("--eval-size", type=int, default=128, help="eval examples (0 = the whole eval split)")
    p.add_argument("--arms", default=",".join(DEFAULT_ARMS), help=f"comma-separated, from: {', '.join(ARMS)}")
    p.add_argument("--lora-targets", default="q_proj,v_proj", help="LoRA on these modules in every arm")
    p.add_argument("--boundaries", type=ints_arg, default=None,
                   help="first layer of chunks 2..K in every arm (default: an even split), e.g. 20,25")
    p.add_argument("--reference-threads", type=int, default=DEFAULT_THREADS,
                   help="torch threads of the single-process arms (the engine's default; 0 = every core)")
