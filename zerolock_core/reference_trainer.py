"""Single-process trainers: `bp` (backprop through the whole split model) and `zerolock`
(the chunks one after another, boundaries detached). They are the oracles the multi-process
pipeline must reproduce."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import torch

from .alpha_schedule import alpha_by_step
from .artifacts import save_final_weights, write_json_atomic
from .config import RunConfig
from .evaluation import evaluate_chunks
from .run_report import LossCurves, eval_block
from .stage_worker import StageWorker, StepLoss
from .run_setup import RunSetup, build_run_setup
from .threads import pin_threads


def make_workers(setup: RunSetup) -> list[StageWorker]:
    cfg = setup.cfg
    return [StageWorker(chunk=c, alpha=cfg.objective.alpha_for(c.index), consistency=cfg.objective.consistency,
                        microbatches=cfg.train.microbatches, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay,
                        alpha_at=alpha_by_step(cfg, c.index))
            for c in setup.chunks]


def zerolock_microbatch(workers: list[StageWorker], mb: dict[str, torch.Tensor]) -> list[StepLoss]:
    """The chunks one after another, each message built and read exactly as a pipeline stage does."""
    losses, x, h_in, prev_rows = [], mb["input_ids"], None, None
    for k, w in enumerate(workers):
        h_out = w.forward(mb, x)
        message = w.outgoing(mb, h_out) if k + 1 < len(workers) else None  # early forwarding
        losses.append(w.local_backward(mb, h_in, h_out, prev_rows))
        if message is not None:
            h_in, prev_rows = workers[k + 1].incoming(mb, message, tuple(h_out.shape))
            x = h_in
    return losses


def bp_microbatch(workers: list[StageWorker], mb: dict[str, torch.Tensor]) -> StepLoss:
    h = mb["input_ids"]
    for w in workers:
        h = w.forward(mb, h)
    return workers[-1].bp_loss_backward(mb, h)


def train_reference(cfg: RunConfig, *, progress: bool = True,
                    on_step: Callable[[int, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    threads = pin_threads(cfg.train.threads)  # the one policy: threads.py
    t0 = time.perf_counter()
    setup = build_run_setup(cfg)
    workers = make_workers(setup)
    setup_s = time.perf_counter() - t0
    method, steps = cfg.train.method, cfg.train.steps
    names = [f"chunk{k}" for k in range(len(workers))] if method == "zerolock" else ["global"]
    curves = LossCurves(names=names)
    history: list[dict[str, Any]] = []

    bar = _progress(steps, enabled=progress, desc=f"{method} K={cfg.train.stages}")
    t_train = time.perf_counter()
    for step in range(steps):
        per_chunk: dict[str, list[StepLoss]] = {n: [] for n in names}
        for mb in setup.microbatches(step):
            if method == "zerolock":
                for name, loss in zip(names, zerolock_microbatch(workers, mb)):
                    per_chunk[name].append(loss)
            else:
                per_chunk["global"].append(bp_microbatch(workers, mb))
        for w in workers:
            w.optimizer_step()
        curves.add(step + 1, per_chunk)
        last = curves.values[names[-1]]["loss"][-1]
        if cfg.train.eval_every and (step + 1) % cfg.train.eval_every == 0 and step + 1 < steps:
            history.append({"step": step + 1, **eval_block(_evaluate(setup))})
        if on_step is not None:
            on_step(step + 1, {"loss": last})
        bar.set_postfix(loss=f"{last:.3f}")
        bar.update(1)
    train_s = time.perf_counter() - t_train
    bar.close()

    final_eval = eval_block(_evaluate(setup))
    history.append({"step": steps, **final_eval})
    metrics = {
        "config": cfg.to_dict(),
        "eval": final_eval,
        "eval_history": history,
        "train": {"curves": curves.to_json()},
        "setup_s": setup_s,
        "wall_s": train_s,
        "samples_per_s": steps * cfg.train.batch / train_s,
        "threads": threads,
        "layers": [list(c.layer_range) for c in setup.chunks],
    }
    if cfg.out:
        for c in setup.chunks:
            save_final_weights(cfg.out, c.index, c.trainable_state())
        write_json_atomic(Path(cfg.out) / "metrics.json", metrics)
    return metrics


def _evaluate(setup: RunSetup) -> list[dict[str, float]]:
    return evaluate_chunks(setup.chunks, setup.eval, setup.label_first_tokens, limit=setup.cfg.data.eval_size)


def _progress(total: int, *, enabled: bool, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, disable=not enabled, desc=desc, unit="step", dynamic_ncols=True)
