"""`zerolock bench readability`: can the frozen head read the hidden state after every layer?

The logit lens (frozen final norm + head) and a fitted translator per layer (the tuned lens), for
the pretrained model and after short fine-tunes (BP through the whole model; ZeroLock's local
losses with K chunks), on any `--model` and `--dataset`. A table, two figures (label accuracy and
answer NLL vs depth, chunk boundaries and the majority-class line marked), and a suggestion of
where to cut the K chunks so that each ends where the head can read.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from zerolock_core.artifacts import load_trained_weights
from zerolock_core.chunks import chunk_bounds
from zerolock_core.config import DataConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig
from zerolock_core.readability import TranslatorFit, fit_translators, lens_scores, majority_rate, suggest_boundaries
from zerolock_core.reference_trainer import train_reference
from zerolock_core.run_setup import build_run_setup
from zerolock_core.threads import DEFAULT_THREADS, pin_threads, threads_for
from . import plots
from .presets import resolve_bench_model
from .experiment import Experiment
from .settings import BenchSettings, report_header
from .table import markdown_table

FINETUNES = ("bp", "zerolock")
COND_COLORS = {"pretrained": "#7f7f7f", "bp": "#636efa", "zerolock": "#ab63fa"}
DASHES = {"lens": "solid", "tuned": "dot"}


def lens_config(settings: BenchSettings, *, method: str, stages: int, steps: int, eval_size: int,
                out: Path | None, boundaries: tuple[int, ...] | None, threads: int = DEFAULT_THREADS) -> RunConfig:
    return RunConfig(
        model=ModelConfig(model=resolve_bench_model(settings.model), boundaries=boundaries),
        data=DataConfig(dataset=settings.dataset, seq_len=settings.seq_len, eval_size=eval_size),
        objective=ObjectiveConfig(alpha=(settings.alpha,), consistency=settings.consistency),
        train=TrainConfig(runtime="reference", method=method, stages=stages, batch=8, microbatches=4,
                          steps=max(1, steps), lr=settings.lr, seed=settings.seed,
                          threads=threads_for(threads)),
        out=None if out is None else str(out),
    )


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _bar(label: str):
    def progress(done: int, total: int) -> None:
        if done == total or done % max(1, total // 10) == 0:
            _say(f"  {label}: {done}/{total}")
    return progress


def measure_condition(cfg: RunConfig, *, run_dir: Path | None, fit: TranslatorFit | None,
                      eval_size: int, progress=_bar) -> dict[str, Any]:
    """Lens (and tuned-lens) curves of one set of weights: the pretrained model or a run's.
    `progress(label)` returns a `(done, total)` callback (the terminal's lines, or the dashboard's bar)."""
    setup = build_run_setup(cfg)
    if run_dir is not None:
        load_trained_weights(setup.chunks, run_dir)
    name = "pretrained" if run_dir is None else cfg.train.method
    t0 = time.perf_counter()
    lens = lens_scores(setup.chunks, setup.eval, setup.label_first_tokens, limit=eval_size,
                       progress=progress(f"{name}: lens over eval batches"))
    result: dict[str, Any] = {"lens": lens}
    if fit is not None:
        answers = torch.unique(torch.cat([s.labels[s.labels != -100] for s in (setup.train, setup.eval)]))
        translators = fit_translators(setup.chunks, setup.train, answers, fit,
                                      progress=progress(f"{name}: translators fitted (of {len(lens)} layers)"))
        result["tuned"] = lens_scores(setup.chunks, setup.eval, setup.label_first_tokens, limit=eval_size,
                                      translators=translators)
        result["answer_vocab"] = int(answers.numel())
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["chance"] = majority_rate(setup.eval, eval_size)
    return result


def run_readability(settings: BenchSettings, *, out: Path, stages: int, finetune: tuple[str, ...],
                    finetune_steps: int, eval_size: int, fit: TranslatorFit | None,
                    boundaries: tuple[int, ...] | None, threads: int = DEFAULT_THREADS) -> dict[str, Any]:
    threads = pin_threads(threads)
    base = lens_config(settings, method="bp", stages=stages, steps=1, eval_size=eval_size, out=None,
                       boundaries=boundaries, threads=threads)
    conditions: dict[str, Any] = {}
    _say(f"readability of {settings.model} on {settings.dataset}: pretrained")
    conditions["pretrained"] = measure_condition(base, run_dir=None, fit=fit, eval_size=eval_size)
    for method in finetune if finetune_steps > 0 else ():
        run_dir = out / f"finetune-{method}"
        cfg = lens_config(settings, method=method, stages=stages, steps=finetune_steps, eval_size=eval_size,
                          out=run_dir, boundaries=boundaries, threads=threads)
        _say(f"fine-tuning with {method} for {finetune_steps} steps (K={stages}) ...")
        train_reference(cfg, progress=False)
        conditions[method] = measure_condition(cfg, run_dir=run_dir, fit=fit, eval_size=eval_size)
    return assemble_report(settings, conditions, stages=stages, boundaries=boundaries, fit=fit,
                           finetune_steps=finetune_steps, eval_size=eval_size)


def assemble_report(settings: BenchSettings, conditions: dict[str, Any], *, stages: int,
                    boundaries: tuple[int, ...] | None, fit: TranslatorFit | None, finetune_steps: int,
                    eval_size: int) -> dict[str, Any]:
    """The report (and what `figures` / `format_report` read) from measured conditions."""
    first = next(iter(conditions.values()))
    layers, chance = len(first["lens"]), first["chance"]
    cuts = [start for start, _ in chunk_bounds(layers, stages, boundaries)[1:]]
    suggestions = {name: {curve: suggest_boundaries([r["label_accuracy"] for r in c[curve]], stages=stages,
                                                    chance=chance)
                          for curve in ("lens", "tuned") if curve in c}
                   for name, c in conditions.items()}
    return report_header(
        "readability", settings, stages=stages, finetune_steps=finetune_steps, eval_size=eval_size,
        translator=None if fit is None else asdict(fit), layers=layers, chance=chance,
        chunk_boundaries=cuts, conditions=conditions, suggestions=suggestions,
    )


def _curves(report: dict[str, Any]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(condition, "lens" or "tuned", its score per layer) of every curve measured."""
    return [(name, curve, c[curve]) for name, c in report["conditions"].items() for curve in ("lens", "tuned")
            if curve in c]


def format_report(report: dict[str, Any]) -> str:
    curves, cuts = _curves(report), set(report["chunk_boundaries"])
    heads = ["layer", *(f"{name} {curve}" for name, curve, _ in curves)]
    rows = [[f"{i + 1}{' ▶' if i in cuts else ''}", *(f"{x[i]['label_accuracy']:.3f}" for _, _, x in curves)]
            for i in range(report["layers"])]
    lines = [f"label accuracy of the readout after every layer (majority class {report['chance']:.3f}; "
             f"▶ = the first layer of a chunk at K={report['stages']})", markdown_table(heads, rows), ""]
    for name, by_curve in report["suggestions"].items():
        for curve, s in by_curve.items():
            where = "no cut works" if s["boundaries"] is None else \
                f"--boundaries {','.join(str(b) for b in s['boundaries'])}" if s["boundaries"] else "-"
            lines.append(f"cut suggestion ({name}, {curve}): {where}  ({s['why']})")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    figs = {}
    for metric, title in (("label_accuracy", "label accuracy"), ("nll", "answer NLL (nats / token)")):
        fig = plots.figure(
            (plots.curve(f"{name} · {'frozen head' if curve == 'lens' else 'fitted translator'}",
                         [r["layer"] for r in scores], [r[metric] for r in scores],
                         color=COND_COLORS.get(name, "#333"), line={"dash": DASHES[curve]})
             for name, curve, scores in _curves(report)),
            title=f"Readability of {report['settings']['model']} on {report['settings']['dataset']}: {title} after "
                  f"each layer (dashed: chunk boundaries at K={report['stages']})",
            xaxis_title="layer", yaxis_title=title, template="plotly_white")
        for cut in report["chunk_boundaries"]:
            fig.add_vline(x=cut + 0.5, line=dict(color="#bbb", dash="dash"))
        if metric == "label_accuracy":
            fig.add_hline(y=report["chance"], line=dict(color="#d62728", dash="dot"),
                          annotation_text="majority class", annotation_position="bottom right")
        figs[f"readability_{metric}"] = fig
    return figs


def _readability_arguments(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    finetune = tuple(x for x in a.finetune.split(",") if x and x != "none")
    bad = [x for x in finetune if x not in FINETUNES]
    if bad:
        raise ValueError(f"--finetune {','.join(bad)}: choose from {', '.join(FINETUNES)} or none")
    fit = None if a.translator == "none" else TranslatorFit(
        kind=a.translator, examples=a.translator_examples, steps=a.translator_steps, seed=a.seed)
    return dict(stages=a.stages, finetune=finetune, finetune_steps=a.steps, eval_size=a.eval_size, fit=fit,
                boundaries=None if a.boundaries is None else tuple(int(x) for x in a.boundaries.split(",")),
                threads=a.reference_threads)


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
    p.add_argument("--reference-threads", type=int, default=DEFAULT_THREADS,
                   help="torch threads (the engine's default; 0 = every core)")
