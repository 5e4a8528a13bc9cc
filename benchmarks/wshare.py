"""`zerolock bench wshare`: how much of a stage's backward a zero-bubble schedule could move into its bubbles.

Zero-bubble pipelines (Qi et al., ICLR 2024) split a stage's backward into B — the gradient of its input,
which the stage upstream waits for — and W — the gradient of its weights, which nobody waits for — and run
W later, in what would be idle time. Under LoRA the base weights are frozen: W is only the adapters'
gradient. This measures, for one stage (the middle chunk of K), on a real micro-batch shape:

* B: `autograd.grad(out, input)` alone (autograd computes only what that needs: no weight gradient);
* W: `autograd.grad(out, trainable weights)` alone;
* B+W: both in one pass (what 1F1B runs);
* W share = W / (B + W), and what deferring W takes off the critical path: (B+W − B) / (B+W).

For LoRA of rank 4 and 64 on q,v and on every linear module, and for full fine-tuning of the same chunk
(every weight of its layers trains). Each backward gets its own forward (not timed); the conditions are
interleaved, repeat by repeat, so a busy machine slows all of them alike: the ratios are side by side.
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch

from zerolock_core.config.run_config import replace
from .common.experiment import Experiment
from .common.probe import in_process_config, pinned_threads
from .common.settings import BenchSettings, report_header
from .common.table import markdown_table, preamble

ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(kw_only=True, frozen=True)
class Condition:
    name: str
    rank: int
    targets: tuple[str, ...]
    full: bool = False  # full fine-tuning: every weight of the chunk's layers trains (its LoRA does not)


CONDITIONS = (
    Condition(name="LoRA r=4, q,v", rank=4, targets=("q_proj", "v_proj")),
    Condition(name="LoRA r=64, q,v", rank=64, targets=("q_proj", "v_proj")),
    Condition(name="LoRA r=4, all linear", rank=4, targets=ALL_LINEAR),
    Condition(name="LoRA r=64, all linear", rank=64, targets=ALL_LINEAR),
    Condition(name="full fine-tuning", rank=4, targets=("q_proj", "v_proj"), full=True),
)
PARTS = ("B", "W", "BW")


def chunk_for(settings: BenchSettings, c: Condition, *, stages: int, batch: int, microbatches: int):
    """The middle chunk of a K-way split with `c`'s trainable weights (only its layers read from disk)."""
    from zerolock_core.train.run_setup import build_run_setup

    cfg = in_process_config(settings, method="zerolock", stages=stages, batch=batch, microbatches=microbatches)
    cfg = replace(cfg, model={"lora_rank": c.rank, "lora_alpha": 4.0 * c.rank, "lora_targets": c.targets})
    stage = stages // 2
    chunk = build_run_setup(cfg, stage=stage).chunks[0]
    params = [p for p in chunk.layers.parameters() if p.requires_grad]
    if c.full:  # every weight of the layers, not the (zero) adapters: full fine-tuning alone
        for name, p in chunk.layers.named_parameters():
            p.requires_grad_("lora_" not in name)
        params = [p for p in chunk.layers.parameters() if p.requires_grad]
    return chunk, params, stage


def timed_backward(chunk, params, h: torch.Tensor, mask: torch.Tensor, grad: torch.Tensor, part: str) -> float:
    x = h.detach().requires_grad_(True)
    out = chunk(x, mask)
    wanted = {"B": [x], "W": params, "BW": [x, *params]}[part]
    t0 = time.perf_counter()
    torch.autograd.grad(out, wanted, grad)
    return time.perf_counter() - t0


def run_wshare(settings: BenchSettings, *, stages: int, batch: int, microbatches: int, timings: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    with pinned_threads(settings.threads):
        built = [(c, *chunk_for(settings, c, stages=stages, batch=batch, microbatches=microbatches))
                 for c in CONDITIONS]
        d = built[0][1].config.hidden_size
        g = torch.Generator().manual_seed(settings.seed)
        h = torch.randn(batch // microbatches, settings.seq_len, d, generator=g)
        grad = torch.randn(h.shape, generator=g)
        mask = torch.ones(h.shape[:2], dtype=torch.long)
        times: dict[tuple[str, str], list[float]] = {(c.name, p): [] for c, *_ in built for p in PARTS}
        for repeat in range(timings + 1):  # the first round warms up and is dropped
            for c, chunk, params, _ in built:
                for part in PARTS:
                    t = timed_backward(chunk, params, h, mask, grad, part)
                    if repeat:
                        times[(c.name, part)].append(t)
        for c, chunk, params, stage in built:
            b, w, bw = (statistics.median(times[(c.name, p)]) for p in PARTS)
            rows.append({"condition": c.name, "rank": c.rank, "targets": list(c.targets), "full": c.full,
                         "stage": stage, "layers": list(chunk.layer_range),
                         "trainable_params": sum(p.numel() for p in params),
                         "B_s": b, "W_s": w, "BW_s": bw, "w_share": w / (b + w),
                         "deferrable": max(0.0, bw - b) / bw})
    return {**report_header("wshare", settings),
            "config": {"stages": stages, "microbatch": batch // microbatches, "seq_len": settings.seq_len,
                       "hidden": d, "timings": timings},
            "results": rows}


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = preamble(report, f"the middle chunk of K={c['stages']}, micro-batch {c['microbatch']} × "
                             f"{c['seq_len']} tokens; backward parts, median of {c['timings']}")
    lines.append(markdown_table(
        ["trainable weights", "params", "B+W in one pass ms", "B alone ms", "W alone ms", "off the critical path"],
        [[r["condition"], f"{r['trainable_params']:,}", f"{r['BW_s'] * 1e3:.2f}", f"{r['B_s'] * 1e3:.2f}",
          f"{r['W_s'] * 1e3:.2f}", f"{r['deferrable']:.0%}"] for r in report["results"]]))
    lines.append("W alone runs the input-gradient chain too (it needs it to reach earlier layers' adapters): "
                 "what zero-bubble can defer is B+W − B, not W alone")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    """Per condition, the backward a zero-bubble schedule must still run on the critical path (B) and what it
    can move into the bubbles (B+W − B), in the kinds' own colours."""
    from zerolock_core.viz.palette import KIND_COLOURS, KIND_LABELS
    from zerolock_core.vocabulary import Kind
    from .common import plots

    rows = report["results"]
    names = [r["condition"] for r in rows]
    stays = [r["B_s"] * 1e3 for r in rows]
    moves = [max(0.0, r["BW_s"] - r["B_s"]) * 1e3 for r in rows]
    fig = plots.figure([
        plots.bar(f"{KIND_LABELS[Kind.B]} (input gradient): stays on the critical path", names, stays,
                  marker_color=KIND_COLOURS[Kind.B]),
        plots.bar(f"{KIND_LABELS[Kind.W]}: what zero-bubble can move into the bubbles", names, moves,
                  marker_color=KIND_COLOURS[Kind.W], text=[f"{r['deferrable']:.0%}" for r in rows],
                  textposition="outside")],
        barmode="stack", title=f"What zero-bubble can defer, {report['settings']['model']}: the middle chunk of "
                               f"K={report['config']['stages']}", yaxis_title="ms per micro-batch",
        legend=dict(orientation="h", y=-0.25))
    return {"wshare": fig}


EXPERIMENT = Experiment(
    name="wshare", run=run_wshare, format_report=format_report, figures=figures, steps=1, runs=False, repeats=False,
    shape={"stages": 3, "methods": False},
    arguments=lambda a, out: dict(timings=a.timings))


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--timings", type=int, default=7, help="timed backwards per part and condition (median)")
