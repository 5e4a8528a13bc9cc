"""Single-process trainers: `bp` (backprop through the whole split model) and `zerolock`
(the chunks one after another, boundaries detached). They are the oracles the multi-process
pipeline must reproduce.

`train_reference` writes its run directory by the same rules as the pipeline (`RunDir`): its config,
a lock while it trains, a previous run refused unless `overwrite`, and a `Metrics` record at the end
— finished, or stopped when `should_stop()` said so between two steps. With `--ckpt-every N` it checkpoints
every N steps and when it stops (reference_checkpoint.py), and `resume` continues a stopped or crashed run
from its newest checkpoint, recording what the unstopped run would have, bit for bit.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch

from ..rundir.artifacts import save_final_weights
from .auto_boundaries import resolve_auto_boundaries
from ..config.run_config import RunConfig
from ..methods import LOCAL_METHODS
from .evaluation import evaluate_chunks
from ..rundir.loss_curves import GLOBAL, LossCurves, curve_name, summarise, write_curves
from .generation_eval import final_generation
from .reference_checkpoint import load_checkpoint, resumable_step, save_checkpoint, start_tracking
from ..method.tracking import MemoryBoard, tracking_of
from ..rundir.metrics import Metrics, eval_record
from ..rundir.run_dir import RunDir
from .run_setup import RunSetup, build_run_setup
from .stage_worker import StageWorker, StepLoss
from .threads import pin_threads


def make_workers(setup: RunSetup) -> list[StageWorker]:
    """The chunks' workers at step 0, a `track:P` run's tracking attached and started (one board: the chunks
    share this process; a resumed run starts it again where its checkpoint is)."""
    workers, board = [StageWorker.of_run(c, setup.cfg) for c in setup.chunks], MemoryBoard()
    for w in workers:
        w.tracking = tracking_of(w.chunk, readout=setup.cfg.model.readout, method=setup.cfg.train.method,
                                 board=board)
    start_tracking(workers, 0)
    return workers


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


def curve_names(method: str, chunks: int) -> list[str]:
    return list(dict.fromkeys(curve_name(method, k) for k in range(chunks)))  # one "global" under BP


def train_step(setup: RunSetup, workers: list[StageWorker], names: list[str], step: int, *,
               device: torch.device | None = None) -> dict[str, list[StepLoss]]:
    """One optimizer step of every chunk: its micro-batches (moved to `device`, where the chunks are, if
    given), then every optimizer; the losses per curve name."""
    per_chunk: dict[str, list[StepLoss]] = {n: [] for n in names}
    for mb in setup.microbatches(step):
        if device is not None:
            mb = {k: v.to(device) for k, v in mb.items()}
        if setup.cfg.train.method in LOCAL_METHODS:
            for name, loss in zip(names, zerolock_microbatch(workers, mb)):
                per_chunk[name].append(loss)
        else:
            per_chunk[GLOBAL].append(bp_microbatch(workers, mb))
    for w in workers:
        w.optimizer_step()
    return per_chunk


def train_reference(cfg: RunConfig, *, progress: bool = True, overwrite: bool = False,
                    on_step: Callable[[int, dict[str, Any]], None] | None = None,
                    should_stop: Callable[[], bool] = lambda: False, locked: bool = False,
                    resume: bool = False) -> Metrics:
    """Train `cfg` in this process. With `cfg.out`, the run directory is prepared and locked here
    (`locked`: the caller holds its lock already, as `ReferenceJob` does for its child). `resume`: continue
    the run in `cfg.out` from its newest checkpoint (from the start when it has none)."""
    rd = RunDir(cfg.out) if cfg.out else None
    if resume and rd is None:
        raise ValueError("resuming a reference run needs its directory (cfg.out)")
    lock = None
    if rd is not None and not locked:  # a locking caller (ReferenceJob) resolved --boundaries auto already
        if resume:
            made_with = rd.saved_config() if rd.config_json.exists() else None
            cfg, _ = resolve_auto_boundaries(cfg, made_with=made_with)
            lock = rd.prepare_resume(cfg)
        else:
            cfg, balance = resolve_auto_boundaries(cfg)
            lock = rd.prepare_fresh(cfg, overwrite=overwrite, balance=balance)
    elif not locked:
        cfg, _ = resolve_auto_boundaries(cfg)
    try:
        metrics = _train(cfg, progress=progress, on_step=on_step, should_stop=should_stop, rd=rd, resume=resume)
        if rd is not None:
            rd.write_metrics(metrics)
        return metrics
    finally:
        if lock is not None:
            lock.release()


def _train(cfg: RunConfig, *, progress: bool, on_step: Callable[[int, dict[str, Any]], None] | None,
           should_stop: Callable[[], bool], rd: RunDir | None, resume: bool = False) -> Metrics:
    t_begin = time.perf_counter()
    threads = pin_threads(cfg.train.threads)  # the one policy: threads.py
    setup = build_run_setup(cfg)
    workers = make_workers(setup)
    setup_s = time.perf_counter() - t_begin
    method, steps = cfg.train.method, cfg.train.steps
    names = curve_names(method, len(workers))
    curves = LossCurves(names=names)
    history: list[dict[str, Any]] = []
    every = cfg.train.ckpt_every if rd is not None else 0
    start = load_checkpoint(rd, workers, curves=curves, eval_history=history) if resume else 0
    if start and cfg.train.eval_every and start % cfg.train.eval_every == 0 and start < steps \
            and all(h["step"] != start for h in history):
        # a run given more steps goes on from its old last step, evaluated then as the final eval (not kept
        # in the checkpoint): a run trained this long from the start evaluates it as one of its evals
        history.append({"step": start, **eval_record(_evaluate(setup))})
    if start and on_step is not None:
        on_step(start, {"loss": curves.last(names[-1])})

    bar = _progress(steps, enabled=progress, desc=f"{method} K={cfg.train.stages}", initial=start)
    t_train = time.perf_counter()
    done = start
    for step in range(start, steps):
        if should_stop():
            break
        per_chunk = train_step(setup, workers, names, step)
        done = step + 1
        curves.add(done, per_chunk)
        last = curves.last(names[-1])
        if cfg.train.eval_every and done % cfg.train.eval_every == 0 and done < steps:
            history.append({"step": done, **eval_record(_evaluate(setup))})
        if every and done % every == 0:  # the last step's too: a crash in the final eval resumes there
            save_checkpoint(rd, workers, step=done, curves=curves, eval_history=history,
                            keep=cfg.train.keep_checkpoints)
        if on_step is not None:
            on_step(done, {"loss": last})
        if last is not None:
            bar.set_postfix(loss=f"{last:.3f}")
        bar.update(1)
    train_s = time.perf_counter() - t_train
    bar.close()

    stopped = done < steps
    resumable = None
    if stopped and every:
        if done % every and done != start:  # a stop loses nothing: its step is checkpointed too
            save_checkpoint(rd, workers, step=done, curves=curves, eval_history=history,
                            keep=cfg.train.keep_checkpoints)
        resumable = resumable_step(rd, chunks=len(workers))
    final_eval = None
    t_eval = time.perf_counter()
    if not stopped:
        final_eval = eval_record(_evaluate(setup), final_generation(setup))
        history.append({"step": steps, **final_eval})
    eval_s = time.perf_counter() - t_eval
    summary, note = summarise(curves.to_json())
    if rd is not None:
        for c in setup.chunks:
            save_final_weights(rd.path, c.index, c.trainable_state(), step=done)
        write_curves(rd.curves, curves.to_json())
    return Metrics(
        config=cfg.to_dict(), state="stopped" if stopped else "finished",
        reason="stopped on request" if stopped else "", steps_done=done,
        final_steps=[done] * len(setup.chunks) if rd is not None else [],
        eval=final_eval, eval_skipped=_why_not_evaluated(cfg, resumable) if stopped else "",
        eval_history=history, resumed_from_step=start if resume else None, resumable_from_step=resumable,
        throughput_samples_per_s=(done - start) * cfg.train.batch / train_s if train_s > 0 else 0.0,
        setup_s=setup_s, wall_s=train_s, eval_s=eval_s, total_s=time.perf_counter() - t_begin,
        curves=summary, curves_note=note, threads=threads, layers=[list(c.layer_range) for c in setup.chunks])


def _why_not_evaluated(cfg: RunConfig, resumable: int | None) -> str:
    if resumable is not None:
        return "stopped before the last step: not evaluated"
    why = "--ckpt-every is 0" if cfg.train.ckpt_every <= 0 else "no checkpoint was written"
    return f"stopped before the last step: not evaluated (nothing to resume from: {why})"


def _evaluate(setup: RunSetup) -> list[dict[str, float]]:
    return evaluate_chunks(setup.chunks, setup.eval, setup.label_first_tokens, limit=setup.cfg.data.eval_size)


def _progress(total: int, *, enabled: bool, desc: str, initial: int = 0):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, disable=not enabled, desc=desc, unit="step", dynamic_ncols=True)
