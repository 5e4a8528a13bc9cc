"""`zerolock bench readout`: the readout + local loss of one chunk as its own line item, against the
vocabulary size V (the review notes the paper never isolates it).

Synthetic hidden states [b/m, S, d] and a frozen RMSNorm + LM head of V rows; the local loss is
ZeroLock's (α·CE + (1−α)·KL to the previous chunk's readout, recomputed from h_{k−1}). Two ways:
* `omega`: the readout only at the answer positions Ω ([|Ω|, V] logits) — what this engine does
  (checked below on a real chunk);
* `full`: the full S × V readout the authors' code computes (and ships between stages as
  log-probabilities), the loss then taken at Ω.
Time is forward + backward (median of repeats). Memory is measured: bytes saved for backward
(the engine's meter, frozen weights excluded) and the transient peak of everything allocated
(torch profiler on CPU, the CUDA allocator's peak on GPU).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import torch
from torch import nn

from zerolock_core.method.objectives import local_loss
from zerolock_core.viz.palette import estimate_colour, method_colour
from zerolock_core.telemetry import ActivationMeter
from zerolock_core.config.arg_types import ints_arg
from .common import plots
from .common.probe import in_process_config, pinned_threads, probe_costs, timed
from .common.experiment import Experiment
from .common.settings import BenchSettings, report_header
from .common.table import markdown_table, mib, preamble

VARIANTS = ("omega", "full")


def _rms_norm(d: int) -> nn.Module:
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    return LlamaRMSNorm(d)


def _peak_bytes(fn, device: torch.device) -> int:
    """Transient peak of memory allocated while `fn` runs, over what was allocated before."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    run = peak = 0
    for _, delta in sorted((e.time_range.start, e.self_cpu_memory_usage) for e in prof.events()
                           if e.self_cpu_memory_usage):
        run += delta
        peak = max(peak, run)
    return peak


def measure_readout(*, vocab: int, hidden: int, seq_len: int, microbatch: int, answer_tokens: int, variant: str,
                    alpha: float, consistency: str, device: torch.device, repeats: int) -> dict[str, Any]:
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r} is not one of {VARIANTS}")
    if not 1 <= answer_tokens < seq_len:
        raise ValueError(f"--answer-tokens must be in [1, seq_len) (got {answer_tokens})")
    g = torch.Generator().manual_seed(0)
    norm = _rms_norm(hidden).to(device)
    head = nn.Linear(hidden, vocab, bias=False).to(device)
    for p in (*norm.parameters(), *head.parameters()):
        p.requires_grad_(False)
    h_out = torch.randn(microbatch, seq_len, hidden, generator=g).to(device).requires_grad_(True)
    h_prev = torch.randn(microbatch, seq_len, hidden, generator=g).to(device)
    omega = torch.zeros(microbatch, seq_len, dtype=torch.bool, device=device)
    omega[:, seq_len - answer_tokens - 1 : seq_len - 1] = True
    targets = torch.randint(0, vocab, (int(omega.sum()),), generator=g).to(device)
    meter = ActivationMeter([*norm.parameters(), *head.parameters()])

    def step() -> None:
        with meter.measuring():
            if variant == "omega":
                logits = head(norm(h_out[omega])).float()
                with torch.no_grad():
                    prev = head(norm(h_prev[omega])).float()
            else:
                logits = head(norm(h_out)).float()[omega]
                with torch.no_grad():
                    prev = torch.log_softmax(head(norm(h_prev)).float(), dim=-1)[omega]
            loss = local_loss(logits=logits, targets=targets, prev_logits=prev, alpha=alpha, direction=consistency)
            loss.total.backward()
        h_out.grad = None

    step()  # warm-up
    times = [timed(step, device) for _ in range(repeats)]
    meter.reset_peak()  # nothing is alive between steps: the peak of the next one is its own
    step()
    return {
        "vocab": vocab,
        "variant": variant,
        "time_s": statistics.median(times),
        "saved_bytes": meter.peak_bytes,
        "transient_peak_bytes": _peak_bytes(step, device),
        "logit_rows": int(omega.sum()) if variant == "omega" else microbatch * seq_len,
        "would_ship_bytes": microbatch * seq_len * vocab * 4 if variant == "full" else 0,
    }


def engine_readout_rows(settings: BenchSettings, *, batch: int, microbatches: int) -> dict[str, Any]:
    """Run the engine's own Chunk.readout on a real micro-batch: how many rows of logits it makes."""

    from zerolock_core.train.stage_worker import answer_positions
    from zerolock_core.train.run_setup import build_run_setup

    setup = build_run_setup(in_process_config(settings, method="zerolock", stages=2, batch=batch,
                                              microbatches=microbatches))
    mb = setup.microbatches(0)[0]
    omega, _ = answer_positions(mb)
    with torch.no_grad():
        h = setup.chunks[0](mb["input_ids"], mb["attention_mask"])
        logits = setup.chunks[0].readout(h, omega)
    return {
        "batch_shape": list(mb["input_ids"].shape),
        "answer_positions": int(omega.sum()),
        "logits_shape": list(logits.shape),
        "reads_out_at": "omega" if logits.shape[0] == int(omega.sum()) else "all positions",
        "hidden": int(h.shape[-1]),
        "answer_tokens_per_row": int(omega.sum()) / mb["input_ids"].shape[0],
    }


def run_readout(settings: BenchSettings, *, vocabs: tuple[int, ...], batch: int, microbatches: int,
                answer_tokens: int | None, hidden: int | None, repeats: int) -> dict[str, Any]:
    device = torch.device(settings.device)
    engine = engine_readout_rows(settings, batch=batch, microbatches=microbatches)
    d = hidden or engine["hidden"]
    a = answer_tokens or max(1, round(engine["answer_tokens_per_row"]))
    cell = dict(hidden=d, seq_len=settings.seq_len, microbatch=batch // microbatches, answer_tokens=a,
                alpha=settings.alpha, consistency=settings.consistency, device=device, repeats=repeats)
    with pinned_threads(settings.threads):
        rows = [measure_readout(vocab=v, variant=var, **cell) for v in vocabs for var in VARIANTS]
    probe = probe_costs(settings, stages=2, batch=batch, microbatches=microbatches).per_stage[1]
    return {
        **report_header("readout", settings),
        "config": {"vocabs": list(vocabs), "hidden": d, "seq_len": settings.seq_len,
                   "microbatch": batch // microbatches, "answer_tokens_per_row": a, "repeats": repeats},
        "engine": engine,
        "chunk_context": {
            "what": f"the {settings.model} model's last chunk of K=2 (V={engine['logits_shape'][1]}), probed in this "
                    "process",
            "forward_s": probe["F_local"],
            "local_step_s": probe["L"],
            "bp_backward_s": probe["B"],
        },
        "results": rows,
    }


def format_report(report: dict[str, Any]) -> str:
    c, e, ctx = report["config"], report["engine"], report["chunk_context"]
    lines = preamble(report, f"d={c['hidden']}, S={c['seq_len']}, micro-batch {c['microbatch']}, "
                             f"|Ω|={c['answer_tokens_per_row']} per row; forward+backward of readout + local loss "
                             f"(median of {c['repeats']})")
    by_v: dict[int, dict[str, Any]] = {}
    for r in report["results"]:
        by_v.setdefault(r["vocab"], {})[r["variant"]] = r
    rows = [[v, f"{o['time_s'] * 1e3:.2f}", f"{f['time_s'] * 1e3:.2f}", f"{f['time_s'] / o['time_s']:.1f}x",
             mib(o["saved_bytes"]), mib(f["saved_bytes"]), mib(o["transient_peak_bytes"]),
             mib(f["transient_peak_bytes"]), mib(f["would_ship_bytes"])]
            for v, o, f in ((v, x["omega"], x["full"]) for v, x in by_v.items())]
    lines.append(markdown_table(["V", "Ω ms", "full S×V ms", "full/Ω", "Ω saved MiB", "full saved MiB", "Ω peak MiB",
                                 "full peak MiB", "full: log-probs shipped MiB/mb"], rows))
    lines.append(f"context: {ctx['what']}: forward {ctx['forward_s'] * 1e3:.1f} ms, local step (readout + loss + "
                 f"backward) {ctx['local_step_s'] * 1e3:.1f} ms, BP backward {ctx['bp_backward_s'] * 1e3:.1f} ms")
    lines.append(f"the engine reads out at {e['reads_out_at']}: Chunk.readout gave logits {e['logits_shape']} for a "
                 f"{e['batch_shape']} micro-batch with {e['answer_positions']} answer positions")
    return "\n".join(lines)


def figures(report: dict[str, Any]):
    fig = plots.panels(("time (fwd + bwd)", "transient peak memory"))
    panels = ((lambda r: r["time_s"] * 1e3, "ms"), (lambda r: r["transient_peak_bytes"] / 2**20, "MiB"))
    zerolock = method_colour("zerolock")  # the engine's readout; the authors' code the fainter estimate
    for var, color in zip(VARIANTS, (zerolock, estimate_colour(zerolock, 1))):
        rs = [r for r in report["results"] if r["variant"] == var]
        name = "Ω only (engine)" if var == "omega" else "full S×V (authors' code)"
        for col, (value, _) in enumerate(panels, 1):  # one legend entry per variant
            fig.add_trace(plots.curve(name, [r["vocab"] for r in rs], map(value, rs), color=color, legendgroup=var,
                                      showlegend=None if col == 1 else False), row=1, col=col)
    for col, (_, unit) in enumerate(panels, 1):
        fig.update_yaxes(title_text=unit, row=1, col=col)
    fig.update_xaxes(title_text="vocabulary size V", type="log")
    return {"readout_vs_vocab": fig.update_layout(title="Readout + local loss of one chunk vs vocabulary size")}


EXPERIMENT = Experiment(
    name="readout", run=run_readout, figures=figures, format_report=format_report, steps=1, runs=False,
    shape={"stages": None, "methods": False},
    arguments=lambda a, out: dict(vocabs=a.vocabs, answer_tokens=a.answer_tokens, hidden=a.hidden, repeats=a.timings))


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--vocabs", type=ints_arg, default=(2048, 8192, 32000))
    p.add_argument("--answer-tokens", type=int, default=None, help="|Ω| per row (default: the dataset's)")
    p.add_argument("--hidden", type=int, default=None, help="hidden size d (default: the model's)")
    p.add_argument("--timings", type=int, default=7, help="timed forward+backward passes per cell (median)")
