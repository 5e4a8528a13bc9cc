"""`zerolock bench readability`: can the frozen head read the hidden state after every layer?

The logit lens (frozen final norm + head), a fitted translator per layer (the tuned lens) and, with
`--top`, the model's own top N layers (the `top:last` readout's lens, N = the last chunk's layers), for
the pretrained model and after short fine-tunes (BP through the whole model; ZeroLock's local
losses with K chunks), on any `--model` and `--dataset`. A table, two figures (label accuracy and
answer NLL vs depth, chunk boundaries and the majority-class line marked), and a suggestion of
where to cut the K chunks so that each ends where the head can read.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from zerolock_core.analysis.readability import (TranslatorFit, lens_config, measure_condition, measured_curves,
                                       readability_summary)
from zerolock_core.analysis.readability_figures import curve_name, readability_figures
from zerolock_core.train.reference_trainer import train_reference
from zerolock_core.train.threads import DEFAULT_THREADS, pin_threads
from .common.experiment import Experiment
from .common.presets import resolve_bench_model
from .common.settings import BenchSettings, report_header
from .common.table import markdown_table

FINETUNES = ("bp", "zerolock")


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _bar(label: str):
    def progress(done: int, total: int) -> None:
        if done == total or done % max(1, total // 10) == 0:
            _say(f"  {label}: {done}/{total}")
    return progress


def run_readability(settings: BenchSettings, *, out: Path, stages: int, finetune: tuple[str, ...],
                    finetune_steps: int, eval_size: int, fit: TranslatorFit | None,
                    boundaries: tuple[int, ...] | None, threads: int = DEFAULT_THREADS,
                    top: bool = False) -> dict[str, Any]:
    threads = pin_threads(threads)
    common = dict(model=resolve_bench_model(settings.model), dataset=settings.dataset, seq_len=settings.seq_len,
                  stages=stages, eval_size=eval_size, boundaries=boundaries, alpha=(settings.alpha,),
                  consistency=settings.consistency, lr=settings.lr, seed=settings.seed, threads=threads)
    base = lens_config(method="bp", steps=1, out=None, **common)
    conditions: dict[str, Any] = {}
    _say(f"readability of {settings.model} on {settings.dataset}: pretrained")
    conditions["pretrained"] = measure_condition(base, run_dir=None, fit=fit, eval_size=eval_size, progress=_bar,
                                                 top=top)
    for method in finetune if finetune_steps > 0 else ():
        run_dir = out / f"finetune-{method}"
        cfg = lens_config(method=method, steps=finetune_steps, out=run_dir, **common)
        _say(f"fine-tuning with {method} for {finetune_steps} steps (K={stages}) ...")
        train_reference(cfg, progress=False)
        conditions[method] = measure_condition(cfg, run_dir=run_dir, fit=fit, eval_size=eval_size, progress=_bar,
                                              top=top)
    return assemble_report(settings, conditions, stages=stages, boundaries=boundaries, fit=fit,
                           finetune_steps=finetune_steps, eval_size=eval_size)


def assemble_report(settings: BenchSettings, conditions: dict[str, Any], *, stages: int,
                    boundaries: tuple[int, ...] | None, fit: TranslatorFit | None, finetune_steps: int,
                    eval_size: int) -> dict[str, Any]:
    """The report (and what `figures` / `format_report` read) from measured conditions."""
    return report_header(
        "readability", settings, stages=stages, finetune_steps=finetune_steps, eval_size=eval_size,
        translator=None if fit is None else asdict(fit),
        **readability_summary(conditions, stages=stages, boundaries=boundaries),
    )


def format_report(report: dict[str, Any]) -> str:
    curves, cuts = measured_curves(report), set(report["chunk_boundaries"])
    heads = ["layer", *(f"{name} {curve_name(curve, report['conditions'][name])}" for name, curve, _ in curves)]
    by_layer = [{r["layer"]: r["label_accuracy"] for r in x} for _, _, x in curves]  # the top lens stops at L − N
    rows = [[f"{i + 1}{' ▶' if i in cuts else ''}",
             *(f"{x[i + 1]:.3f}" if i + 1 in x else "–" for x in by_layer)] for i in range(report["layers"])]
    lines = [f"label accuracy of the readout after every layer (majority class {report['chance']:.3f}; "
             f"▶ = the first layer of a chunk at K={report['stages']})", markdown_table(heads, rows), ""]
    for name, by_curve in report["suggestions"].items():
        for curve, s in by_curve.items():
            where = "no cut works" if s["boundaries"] is None else \
                f"--boundaries {','.join(str(b) for b in s['boundaries'])}" if s["boundaries"] else "-"
            lines.append(f"cut suggestion ({name}, {curve}): {where}  ({s['why']})")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    return readability_figures(report, model=report["settings"]["model"], dataset=report["settings"]["dataset"],
                               stages=report["stages"])


def _readability_arguments(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    finetune = tuple(x for x in a.finetune.split(",") if x and x != "none")
    bad = [x for x in finetune if x not in FINETUNES]
    if bad:
        raise ValueError(f"--finetune {','.join(bad)}: choose from {', '.join(FINETUNES)} or none")
    fit = None if a.translator == "none" else TranslatorFit(
        kind=a.translator, examples=a.translator_examples, steps=a.translator_steps, seed=a.seed)
    return dict(stages=a.stages, finetune=finetune, finetune_steps=a.steps, eval_size=a.eval_size, fit=fit,
                boundaries=None if a.boundaries is None else tuple(int(x) for x in a.boundaries.split(",")),
                threads=a.reference_threads, top=a.top)


# --steps: of each fine-tune; no pipeline runs and no geometry flags (--stages only marks chunk boundaries)
EXPERIMENT = Experiment(name="readability", run=run_readability, arguments=_readability_arguments, figures=figures,
                        format_report=format_report, steps=50, seq_len=64, defaults={"lr": 3e-3}, shape=None,
                        runs=False, out=True)


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--stages", type=int, default=3, help="K: whose chunk boundaries to mark and suggest")
    p.add_argument("--boundaries", default=None, help="first layer of chunks 2..K (default: even split)")
    p.add_argument("--finetune", default=",".join(FINETUNES),
                   help="fine-tunes to read after, of --steps steps each: bp,zerolock (none: the pretrained model only)")
    p.add_argument("--eval-size", type=int, default=256)
    p.add_argument("--translator", default="affine", choices=("affine", "mlp", "none"),
                   help="fit this translator per layer (none: the frozen-head lens only)")
    p.add_argument("--translator-steps", type=int, default=150)
    p.add_argument("--translator-examples", type=int, default=256)
    p.add_argument("--top", action="store_true",
                   help="also read every layer through the model's own top N layers (N = the last chunk's at "
                        "--stages: the --readout top:last lens)")
    p.add_argument("--reference-threads", type=int, default=DEFAULT_THREADS,
                   help="torch threads (the engine's default; 0 = every core)")
