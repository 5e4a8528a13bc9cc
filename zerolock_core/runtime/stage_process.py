"""The body of one stage's OS process: connect, build its chunk, (restore,) run its actions, report."""
from __future__ import annotations

import datetime
import gc
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import torch
import torch.distributed as dist

from ..artifacts import save_final_weights, write_json_atomic
from ..config import FailureSpec, RunConfig
from ..schedule import Action, build_schedule
from ..stage_worker import StageWorker
from ..telemetry import Event, EventWriter
from ..workbench import build_workbench
from .checkpoint import CheckpointStore, restore
from .executor import Executor, StopRequested
from .heartbeat import Heartbeat
from .link_emulation import link_model
from .links import FlowControl, Link
from .recovery_context import (STOP_KEY, FaultTolerance, LinkRebuilt, ReplayBuffer, link_gen_key, need_key,
                               wait_key)

COMPLETE_KEY = "control/complete"
LINK_LOST_EXIT = 3


def _fault_tolerant(cfg_dict: dict[str, Any]) -> bool:
    return cfg_dict.get("train", {}).get("ckpt_every", 0) > 0


def _is_link_error(err: BaseException) -> bool:
    text = str(err)
    return any(s in text for s in ("Connection closed", "Connection reset", "Broken pipe", "timed out",
                                   "Timed out", "gloo", "NCCL"))


@dataclass(kw_only=True, frozen=True)
class StageLaunch:
    """How the coordinator starts a stage process."""
    stage: int
    host: str
    port: int
    run_dir: str
    generation: int = 0  # bumped for every replacement / restart
    replacement: bool = False  # local recovery: restore and replay while the others keep going
    rollback_step: int | None = None  # global rollback: restore this step (or the newest before it)


def stage_threads(cfg: RunConfig) -> int:
    if cfg.train.threads > 0:
        return cfg.train.threads
    return max(1, (os.cpu_count() or 1) // cfg.train.stages)


def stage_device(cfg: RunConfig, stage: int) -> torch.device:
    if cfg.train.device == "cpu":
        return torch.device("cpu")
    count = torch.cuda.device_count()
    if count == 0:
        raise RuntimeError("--device cuda but no CUDA device is visible")
    return torch.device("cuda", stage % count)  # several stages may share one GPU


def stage_main(cfg_dict: dict[str, Any], launch: StageLaunch) -> None:
    """Entry point of a stage process (spawned by the coordinator, or one torchrun rank)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the coordinator, which stops us
    store = dist.TCPStore(launch.host, launch.port, is_master=False, timeout=datetime.timedelta(seconds=120))
    stage = launch.stage
    state_key = f"stage/{stage}/state"
    heartbeat = Heartbeat(launch.host, launch.port, stage, launch.generation)
    try:
        store.set(state_key, "loading")
        _run_stage(RunConfig.from_dict(cfg_dict), launch, store, state_key)
    except StopRequested:
        store.set(state_key, "stopped")
    except Exception as err:
        if store.check([STOP_KEY]):  # we were already being stopped (e.g. a neighbour closed the link)
            store.set(state_key, "stopped")
            return
        if isinstance(err, RuntimeError) and _fault_tolerant(cfg_dict) and _is_link_error(err):
            # A neighbour died under us: the coordinator decides (global rollback restarts us).
            store.set(state_key, "link-lost")
            sys.exit(LINK_LOST_EXIT)
        # Record the cause, then stop the others before our exit closes their links, so that they
        # report "stopped" and this error stays the run's first.
        store.set(f"stage/{stage}/error", f"{type(err).__name__}: {err}\n{traceback.format_exc()}")
        store.set(STOP_KEY, f"stage {stage} failed")
        store.set(state_key, "error")
        sys.exit(1)
    finally:
        heartbeat.close()


def _shifted(actions: tuple[Action, ...], offset: int) -> tuple[Action, ...]:
    if offset == 0:
        return actions
    return tuple(Action(stage=a.stage, kind=a.kind, microbatch=None if a.microbatch is None else a.microbatch + offset)
                 for a in actions)


def _run_stage(cfg: RunConfig, launch: StageLaunch, store: dist.Store, state_key: str) -> None:
    stage, run_dir = launch.stage, Path(launch.run_dir)
    torch.set_num_threads(stage_threads(cfg))
    device = stage_device(cfg, stage)
    t, K = cfg.train, cfg.train.stages
    bench = build_workbench(cfg)
    chunk = bench.chunks[stage].to(device)
    bench.chunks = [chunk]  # drop the other chunks: this process holds only its own
    gc.collect()
    worker = StageWorker(chunk=chunk, alpha=cfg.objective.alpha_for(stage), consistency=cfg.objective.consistency,
                         microbatches=t.microbatches, lr=t.lr, weight_decay=t.weight_decay)
    shape = (t.batch // t.microbatches, cfg.data.seq_len, chunk.config.hidden_size)
    store.set("meta/hidden_bytes_per_microbatch", str(shape[0] * shape[1] * shape[2] * 4))
    events = EventWriter(run_dir / "events.jsonl")

    # ---- fault tolerance: checkpoints, restore, replay bookkeeping --------------------------
    ft = None
    start_step = 0
    restored_losses: dict[str, list[dict]] = {}
    if t.ckpt_every > 0:
        log = lambda message: store.set(f"stage/{stage}/ckpt_log/{time.monotonic_ns()}", message)  # noqa: E731
        ckpts = CheckpointStore(run_dir / "checkpoints", stage=stage, keep=t.keep_checkpoints, log=log)
        capacity = t.replay_buffer or (t.ckpt_every + 1) * t.microbatches + t.inflight_depth + 1
        ft = FaultTolerance(store=store, stage=stage, generation=launch.generation, checkpoints=ckpts,
                            ckpt_every=t.ckpt_every, local_recovery=t.method == "zerolock",
                            failures=tuple(FailureSpec.parse(f) for f in t.failures),
                            replay=ReplayBuffer(capacity=capacity) if stage < K - 1 else None)
        if launch.replacement or launch.rollback_step is not None:
            t0 = time.monotonic_ns()
            ckpt = ckpts.load_latest(at_most=launch.rollback_step)
            if ckpt is not None:
                restore(ckpt, params=chunk.trainable_state(), optimizer=worker.optimizer)
                worker.steps_done = start_step = ckpt.step
                restored_losses = ckpt.meta.get("losses", {})
                if ft.replay is not None and ckpt.meta.get("replay_floor") is not None:
                    ft.replay.floor = ckpt.step * t.microbatches
            events.write(Event(stage=stage, kind="RESTORE", mb=None, t0=t0, t1=time.monotonic_ns(),
                               step=start_step, gen=launch.generation, recv=ckpt.nbytes if ckpt else 0))
            store.set(f"recovery/{stage}/gen{launch.generation}/restored",
                      f"{time.monotonic_ns()} {start_step} {ckpt.nbytes if ckpt else 0}")

    cache: dict[int, list[dict[str, torch.Tensor]]] = {}

    def microbatch_data(mb: int) -> dict[str, torch.Tensor]:
        step, i = divmod(mb, t.microbatches)
        if step not in cache:
            cache.clear()
            cache[step] = [{k: v.to(device) for k, v in d.items()} for d in bench.microbatches(step)]
        return cache[step][i]

    # ---- links ------------------------------------------------------------------------------
    emulation = link_model(cfg.link)

    def make_link(side: str, gen: int) -> Link:
        index = stage - 1 if side == "prev" else stage
        return Link(store, link=index, upstream_end=side == "next", generation=gen, device=device,
                    emulation=emulation)

    def current_gen(link: int) -> int:
        key = link_gen_key(link)
        return int(store.get(key)) if store.check([key]) else 0

    skip_sends_below = replay_until = 0
    first_mb = start_step * t.microbatches
    prev = nxt = None
    if stage > 0:
        gen = current_gen(stage - 1)
        if launch.replacement:  # tell the upstream survivor where our replay starts
            store.set(need_key(stage - 1, gen), str(first_mb))
        prev = make_link("prev", gen)
    if stage < K - 1:
        gen = current_gen(stage)
        if launch.replacement:  # the downstream survivor says what it already has
            skip_sends_below = int(wait_key(store, need_key(stage, gen)))
        nxt = make_link("next", gen)
    if launch.replacement:
        done_key = f"stage/{stage}/mb_done"
        replay_until = max(skip_sends_below, int(store.get(done_key)) if store.check([done_key]) else 0)
        store.set(f"recovery/{stage}/gen{launch.generation}/frontier", str(replay_until))

    depth = t.inflight_depth
    flow_in = FlowControl(store, receiver=stage, depth=depth, start=first_mb) if stage > 0 else None
    flow_out = FlowControl(store, receiver=stage + 1, depth=depth, start=first_mb) if stage < K - 1 else None

    last = [0.0]
    executor: Executor | None = None

    def poll() -> None:
        """Between actions (at most every 20 ms): a stop request, or a link to rebuild."""
        now = time.monotonic()
        if now - last[0] < 0.02:
            return
        last[0] = now
        if store.check([STOP_KEY]):
            raise StopRequested()
        if ft is not None and ft.local_recovery and executor is not None:
            for side, link in (("prev", executor.prev), ("next", executor.next)):
                if link is not None and current_gen(link.link) > link.generation:
                    raise LinkRebuilt(side, current_gen(link.link))

    def on_step(n: int) -> None:
        store.set(f"stage/{stage}/step", str(n))
        if launch.replacement and n * t.microbatches >= replay_until:
            key = f"recovery/{stage}/gen{launch.generation}/caught_up"
            if not store.check([key]):
                store.set(key, str(time.monotonic_ns()))

    executor = Executor(stage=stage, stages=K, method=t.method, worker=worker, microbatch_data=microbatch_data,
                        hidden_shape=shape, prev=prev, next=nxt, flow_in=flow_in, flow_out=flow_out,
                        events=events, poll=poll, on_step=on_step, device=device, depth=depth,
                        memory_budget_bytes=t.memory_budget_bytes, ft=ft, make_link=make_link,
                        replay_until=replay_until, skip_sends_below=skip_sends_below)
    executor.restore_losses(restored_losses)
    actions: tuple[Action, ...] = ()  # restored from the last step's checkpoint: nothing left to run
    if start_step < t.steps:
        schedule = build_schedule(t.method, stages=K, microbatches=t.microbatches, windows=t.steps - start_step)
        actions = _shifted(schedule.for_stage(stage), first_mb)
    store.set(state_key, "running")
    stopped = False
    try:
        executor.run(actions)
        store.set(f"stage/{stage}/actions_done", "1")
        if ft is not None and ft.local_recovery and K > 1:
            _serve_until_complete(executor, store)  # a neighbour may still need our replay buffer
    except StopRequested:
        stopped = True
    except RuntimeError:
        if not store.check([STOP_KEY]):
            raise
        stopped = True  # a neighbour stopped and closed the link under us
    save_final_weights(run_dir, stage, {k: v.cpu() for k, v in chunk.trainable_state().items()})
    write_json_atomic(run_dir / "stages" / f"stage{stage}.json",
                      stage_report(cfg, stage, executor, device, stopped=stopped, generation=launch.generation))
    events.close()
    store.set(state_key, "stopped" if stopped else "done")
    if stopped:
        raise StopRequested()


def _serve_until_complete(executor: Executor, store: dist.Store) -> None:
    """After our own actions: keep rebuilding links (and resending) until every stage is done."""
    while not store.check([COMPLETE_KEY]):
        executor._guarded(executor.poll)
        time.sleep(0.02)


def stage_report(cfg: RunConfig, stage: int, ex: Executor, device: torch.device, *, stopped: bool,
                 generation: int) -> dict[str, Any]:
    c = ex.counters
    span = (c.last_ns - c.first_ns) / 1e9 if c.first_ns is not None else 0.0
    busy = c.busy_ns / 1e9
    chunk = ex.worker.chunk
    report = {
        "stage": stage, "layers": list(chunk.layer_range), "stopped": stopped, "generation": generation,
        "steps_done": ex.worker.steps_done,
        "peak_activation_bytes": ex.meter.peak_bytes,
        "peak_inflight_microbatches": c.peak_inflight,
        "peak_rss_bytes": _peak_rss(),
        "busy_s": busy, "idle_s": max(0.0, span - busy), "span_s": span,
        "active_fraction": busy / span if span > 0 else 0.0,
        "first_ns": c.first_ns, "last_ns": c.last_ns,
        "bytes_sent": c.bytes_sent, "bytes_received": c.bytes_received, "bytes_resent": c.bytes_resent,
        "trainable_bytes": sum(p.numel() * p.element_size() for p in chunk.parameters() if p.requires_grad),
        "model_bytes": sum(p.numel() * p.element_size() for p in chunk.parameters()),
        "optimizer_bytes": sum(v.numel() * v.element_size() for s in ex.worker.optimizer.state.values()
                               for v in s.values() if torch.is_tensor(v)),
        "losses": ex.losses_json(),
    }
    if ex.ft is not None and ex.ft.replay is not None:
        report["replay_buffer_bytes"] = ex.ft.replay.nbytes()
    if ex.stash is not None:
        report["stashed_weight_versions"] = ex.stash.peak_versions
    if device.type == "cuda":
        report["peak_cuda_bytes"] = torch.cuda.max_memory_allocated(device)
    return report


def _peak_rss() -> int:
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return psutil.Process().memory_info().rss
