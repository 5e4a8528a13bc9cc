"""The body of one stage's OS process, as its phases in order:

    connect -> build its chunk -> restore -> link -> run the schedule -> report

`stage_main` is the entry point (spawned by the coordinator, or one torchrun rank); each phase is
a function below. The process ends in one of the states of `protocol.stage_state`: done, stopped,
error (with `protocol.stage_error` set) or link-lost.
"""
from __future__ import annotations

import datetime
import gc
import json
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch
import torch.distributed as dist

from ..rundir.artifacts import save_final_weights, save_snapshot_weights
from ..rundir.atomic_files import write_json_atomic
from ..rundir.run_dir import RunDir
from ..config.run_config import FailureSpec, RunConfig
from ..train.determinism import apply_from_env
from ..methods import recovers_locally, schedule_of
from ..train.threads import threads_for
from ..schedule import Action, iter_stage_actions
from ..train.stage_worker import StageWorker
from ..telemetry import Event, EventWriter
from ..telemetry.lifecycle import StartupClock, write_lifecycle
from ..telemetry.process_memory import peak_rss_bytes
from ..train.run_setup import build_run_setup
from ..vocabulary import Kind
from . import protocol
from .checkpoint import CheckpointStore, restore
from .errors import LinkBroken, LinkRebuilt, StopRequested
from ..method.tracking import tracking_of
from .executor import Durability, Executor, Wiring
from .fault_injection import FaultInjection
from .pace import Pace
from .heartbeat import Heartbeat
from .link_emulation import link_model
from .links import FlowControl, Link
from .loss_log import LossLog
from .processes import ORPHANED_EXIT
from .replay_buffer import ReplayBuffer
from .tracking_board import StoreBoard

LINK_LOST_EXIT = 3
STORE_TIMEOUT_S = 120.0


@dataclass(kw_only=True, frozen=True)
class StageLaunch:
    """How the coordinator starts a stage process."""
    stage: int
    host: str
    port: int
    run_dir: str
    generation: int = 0  # bumped for every replacement / restart
    replacement: bool = False  # local recovery: restore and replay while the others keep going
    restore_step: int | None = None  # restore this checkpoint step (0: from scratch); None: a fresh start
    coordinated: bool = True  # a `Run` watches us (False under torchrun: nobody respawns a stage)
    spawned_ns: int = 0  # when the coordinator spawned us (monotonic ns; 0: unknown), for the start-up span


def stage_threads(cfg: RunConfig) -> int:
    return threads_for(cfg.train.threads, sharing=cfg.train.stages)  # K stage processes share the cores


def stage_device(cfg: RunConfig, stage: int) -> torch.device:
    if cfg.train.device == "cpu":
        return torch.device("cpu")
    count = torch.cuda.device_count()
    if count == 0:
        raise RuntimeError("--device cuda but no CUDA device is visible")
    return torch.device("cuda", stage % count)  # several stages may share one GPU


def stage_main(cfg_dict: dict[str, Any], launch: StageLaunch) -> None:
    """Entry point of a stage process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the coordinator, which stops us
    store = dist.TCPStore(launch.host, launch.port, is_master=False,
                          timeout=datetime.timedelta(seconds=STORE_TIMEOUT_S))
    stage = launch.stage
    state_key = protocol.stage_state(stage)
    heartbeat = Heartbeat(launch.host, launch.port, stage, launch.generation)
    clock = StartupClock(stage=stage, generation=launch.generation, spawned_ns=launch.spawned_ns)
    try:
        _enter(store, clock, "loading")
        final = _run_stage(RunConfig.from_dict(cfg_dict), launch, store, heartbeat, clock)
        heartbeat.close()  # before the last word: the store may go away once every stage has said it
        _last_word(store, state_key, final)
    except StopRequested:
        heartbeat.close()
        _last_word(store, state_key, "stopped")
    except Exception as err:
        heartbeat.close()
        if _store_gone(store):
            os._exit(ORPHANED_EXIT)  # the coordinator died first: nobody is left to tell
        if store.check([protocol.STOP]):  # we were already being stopped (e.g. a neighbour closed the link)
            _last_word(store, state_key, "stopped")
            return
        if isinstance(err, LinkBroken) and launch.coordinated and _fault_tolerant(cfg_dict):
            # A neighbour died under us: the coordinator decides (a global rollback restarts us).
            _last_word(store, state_key, "link-lost")
            sys.exit(LINK_LOST_EXIT)
        # Record the cause, then stop the others before our exit closes their links, so that they
        # report "stopped" and this error stays the run's first.
        why = (_link_broken_reason(stage, err) if isinstance(err, LinkBroken) else f"{type(err).__name__}: {err}")
        _last_word(store, protocol.stage_error(stage), f"{why}\n{traceback.format_exc()}")
        _last_word(store, protocol.STOP, f"stage {stage} failed")
        _last_word(store, state_key, "error")
        sys.exit(1)
    if launch.coordinated:
        exit_now(0)


def exit_now(code: int) -> None:
    """End the process without running destructors: everything is on disk and reported, and a
    process group torn down after its peer has gone can abort the interpreter ("terminate called
    without an active exception"), which would turn a clean end into a crash."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _enter(store: dist.Store, clock: StartupClock, phase: str) -> None:
    """A start-up phase begins: the coordinator's status shows it, the lifecycle record times it."""
    clock.enter(phase)
    store.set(protocol.stage_state(clock.stage), phase)


def _store_gone(store: dist.Store) -> bool:
    try:
        store.check([protocol.STOP])
        return False
    except Exception:
        return True


def _last_word(store: dist.Store, key: str, value: str) -> None:
    """A final write to the store; if the coordinator is gone, exit quietly (no traceback)."""
    try:
        store.set(key, value)
    except Exception:
        os._exit(ORPHANED_EXIT)


def _fault_tolerant(cfg_dict: dict[str, Any]) -> bool:
    return cfg_dict.get("train", {}).get("ckpt_every", 0) > 0


# ---- phase 1: build the chunk ----------------------------------------------------------------
@dataclass(kw_only=True)
class Built:
    cfg: RunConfig
    device: torch.device
    setup: Any  # the RunSetup, holding only this stage's chunk
    worker: StageWorker
    hidden_shape: tuple[int, int, int]
    events: EventWriter


def build(cfg: RunConfig, launch: StageLaunch, store: dist.Store) -> Built:
    t = cfg.train
    torch.set_num_threads(stage_threads(cfg))
    apply_from_env()  # ZEROLOCK_DETERMINISTIC=1: the GPU check's bitwise comparison
    device = stage_device(cfg, launch.stage)
    setup = build_run_setup(cfg, stage=launch.stage)  # reads only this stage's weights
    chunk = setup.chunks[0].to(device)
    setup.chunks = [chunk]
    gc.collect()
    worker = StageWorker.of_run(chunk, cfg)
    worker.tracking = tracking_of(chunk, readout=cfg.model.readout, method=t.method, board=StoreBoard(store))
    shape = (t.batch // t.microbatches, cfg.data.seq_len, chunk.config.hidden_size)
    store.set(protocol.HIDDEN_BYTES, str(shape[0] * shape[1] * shape[2] * 4))
    return Built(cfg=cfg, device=device, setup=setup, worker=worker, hidden_shape=shape,
                 events=EventWriter(RunDir(launch.run_dir).event_file))


# ---- phase 2: restore ------------------------------------------------------------------------
@dataclass(kw_only=True)
class Restored:
    checkpoints: CheckpointStore | None
    start_step: int = 0
    replay_floor: int = 0
    tensors: dict[str, torch.Tensor] | None = None  # the restored checkpoint's (a track:P run's versions)


def checkpoint_logger(run_dir: RunDir, stage: int):
    """Where the loader says why it skipped a checkpoint: a file in the run directory (it outlives
    the coordinator's store), shown in metrics.json and by the CLI."""
    def log(message: str) -> None:
        line = json.dumps({"stage": stage, "t": time.time(), "message": message}) + "\n"
        fd = os.open(run_dir.checkpoint_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    return log


def restore_phase(b: Built, launch: StageLaunch, store: dist.Store) -> Restored:
    t, stage, run_dir = b.cfg.train, launch.stage, RunDir(launch.run_dir)
    if t.ckpt_every <= 0:
        return Restored(checkpoints=None)
    ckpts = CheckpointStore(run_dir, stage=stage, keep=t.keep_checkpoints,
                            log=checkpoint_logger(run_dir, stage))
    step = launch.restore_step
    if step is None:
        return Restored(checkpoints=ckpts)
    t0 = time.monotonic_ns()
    ckpt = ckpts.load_latest(at_most=step) if step > 0 else None
    if step > 0 and (ckpt is None or ckpt.step != step):
        raise RuntimeError(f"stage {stage}: the checkpoint of step {step} the coordinator chose is not on disk "
                           f"or does not verify (see {run_dir.checkpoint_log.name})")
    out = Restored(checkpoints=ckpts)
    if ckpt is not None:
        restore(ckpt, params=b.worker.chunk.trainable_state(), optimizer=b.worker.optimizer)
        b.worker.steps_done = out.start_step = ckpt.step
        out.replay_floor = ckpt.step * t.microbatches
        out.tensors = ckpt.tensors
    nbytes, t1 = (ckpt.nbytes if ckpt else 0), time.monotonic_ns()
    b.events.write(Event(stage=stage, kind=Kind.RESTORE, mb=None, t0=t0, t1=t1, step=out.start_step,
                         gen=launch.generation, recv=nbytes))
    # the recovery record's restore phase is this event's span: the same two instants
    store.set(protocol.restored(stage, launch.generation), f"{t0} {t1} {out.start_step} {nbytes}")
    return out


# ---- phase 3: link ---------------------------------------------------------------------------
@dataclass(kw_only=True)
class Linked:
    wiring: Wiring
    replay_until: int = 0
    skip_sends_below: int = 0


def link_phase(b: Built, launch: StageLaunch, store: dist.Store, first_mb: int) -> Linked:
    t, stage, K = b.cfg.train, launch.stage, b.cfg.train.stages
    emulation = link_model(b.cfg.link)

    def make_link(side: str, gen: int) -> Link:
        index = stage - 1 if side == "prev" else stage
        return Link(store, link=index, upstream_end=side == "next", generation=gen, device=b.device,
                    emulation=emulation)

    def gen_of(link: int) -> int:
        return protocol.get_int(store, protocol.link_generation(link), 0)

    skip_sends_below = replay_until = 0
    prev = nxt = None
    if stage > 0:
        gen = gen_of(stage - 1)
        if launch.replacement:  # tell the upstream end where our replay starts
            store.set(protocol.need(stage - 1, gen), str(first_mb))
        prev = make_link("prev", gen)
    if stage < K - 1:
        gen = gen_of(stage)
        if launch.replacement:  # the downstream end says what it already has
            skip_sends_below = int(protocol.wait_for(store, protocol.need(stage, gen), timeout_s=STORE_TIMEOUT_S,
                                                     what=f"stage {stage + 1} to say what it needs"))
        nxt = make_link("next", gen)
    if launch.replacement:
        # what an earlier process of this stage ran: its local steps, and the hidden states it took in
        # and ran forward (read before this process's FlowControl resets the position): each one run
        # again is a replayed micro-batch (the REPLAY events, the recovery record's count)
        done = protocol.get_int(store, protocol.microbatches_done(stage), 0)
        consumed = protocol.get_int(store, protocol.flow_consumed(stage), 0) if stage > 0 else 0
        replay_until = max(skip_sends_below, done, consumed)
        store.set(protocol.replay_frontier(stage, launch.generation), str(replay_until))
    depth = t.inflight_depth
    flow_in = (FlowControl(store, receiver=stage, depth=depth, start=first_mb, receiving_end=True)
               if stage > 0 else None)
    flow_out = FlowControl(store, receiver=stage + 1, depth=depth, start=first_mb) if stage < K - 1 else None
    return Linked(wiring=Wiring(prev=prev, next=nxt, flow_in=flow_in, flow_out=flow_out, make_link=make_link),
                  replay_until=replay_until, skip_sends_below=skip_sends_below)


def stage_actions(cfg: RunConfig, stage: int, start_step: int) -> Iterator[Action]:
    """What the stage runs from `start_step` on (CKPT included), made as it is read: a run of any
    number of steps costs a few actions of memory. Empty if it restored the last step."""
    t = cfg.train
    if start_step >= t.steps:
        return iter(())
    assert t.ckpt_every == 0 or start_step % t.ckpt_every == 0, "restores happen at checkpoint steps"
    offset = start_step * t.microbatches
    actions = iter_stage_actions(schedule_of(t.method), stage=stage, stages=t.stages, microbatches=t.microbatches,
                                 windows=t.steps - start_step, checkpoint_every=t.ckpt_every,
                                 frozen_stages=t.frozen_stages)
    if offset == 0:
        return actions
    return (Action(stage=a.stage, kind=a.kind, microbatch=None if a.microbatch is None else a.microbatch + offset)
            for a in actions)


# ---- phase 4: run the schedule, then report --------------------------------------------------
def _run_stage(cfg: RunConfig, launch: StageLaunch, store: dist.Store, heartbeat: Heartbeat,
               clock: StartupClock) -> str:
    """The phases in order; returns the final state ("done" or "stopped")."""
    t, stage, K = cfg.train, launch.stage, cfg.train.stages
    b = build(cfg, launch, store)
    _enter(store, clock, "restoring")
    r = restore_phase(b, launch, store)
    first_mb = r.start_step * t.microbatches
    _enter(store, clock, "linking")
    linked = link_phase(b, launch, store, first_mb)
    durability = None
    # the stage's --fail specs: what kills it (with checkpoints, below) and a straggler (without any too)
    injection = FaultInjection(store=store, stage=stage, run_dir=RunDir(launch.run_dir),
                               failures=tuple(map(FailureSpec.parse, t.failures)))
    if r.checkpoints is not None:
        capacity = t.replay_buffer or (t.ckpt_every + 1) * t.microbatches + t.inflight_depth + 1
        replay = ReplayBuffer(capacity=capacity, floor=r.replay_floor) if stage < K - 1 else None
        durability = Durability(store=store, generation=launch.generation, checkpoints=r.checkpoints,
                                injection=injection,
                                local_recovery=launch.coordinated and recovers_locally(t.method), replay=replay,
                                replay_until=linked.replay_until, skip_sends_below=linked.skip_sends_below)
        if replay is not None:
            store.set(protocol.buffer_floor(stage), str(replay.floor))

    executor: Executor | None = None
    last_poll = [0.0]

    def poll() -> None:
        """Between actions (at most every 20 ms): a stop request, or a link to rebuild."""
        now = time.monotonic()
        if now - last_poll[0] < 0.02:
            return
        last_poll[0] = now
        if store.check([protocol.STOP]):
            raise StopRequested()
        if durability is not None and durability.local_recovery and executor is not None:
            for side, link in (("prev", executor.prev), ("next", executor.next)):
                if link is not None:
                    gen = executor.current_generation(link.link)
                    if gen > link.generation:
                        raise LinkRebuilt(side, gen)

    def on_step(n: int) -> None:
        if t.eval_every and t.final_eval and n % t.eval_every == 0 and n < t.steps:  # scored after training
            save_snapshot_weights(launch.run_dir, stage, {k: v.cpu() for k, v in b.worker.chunk.trainable_state().items()},
                                  step=n)
        store.set(protocol.stage_step(stage), str(n))
        if launch.replacement and n * t.microbatches >= linked.replay_until:
            key = protocol.caught_up(stage, launch.generation)
            if not store.check([key]):
                store.set(key, str(time.monotonic_ns()))

    executor = Executor(stage=stage, stages=K, method=t.method, worker=b.worker,
                        microbatch_data=_microbatch_source(b), hidden_shape=b.hidden_shape, wiring=linked.wiring,
                        events=b.events, poll=poll, on_step=on_step, device=b.device, depth=t.inflight_depth,
                        memory_budget_bytes=t.memory_budget_bytes, durability=durability,
                        loss_log=LossLog(RunDir(launch.run_dir).stage_losses(stage), keep_below=r.start_step),
                        pace=Pace(speed=t.speeds[stage], straggler=injection.straggle,
                                  cpu_time=t.device == "cpu"), frozen_stages=t.frozen_stages)
    heartbeat.progress = lambda: executor.counters.actions
    actions = stage_actions(cfg, stage, r.start_step)
    write_lifecycle(RunDir(launch.run_dir).lifecycle, clock.record())
    store.set(protocol.linked(stage, launch.generation), str(time.monotonic_ns()))
    store.set(protocol.stage_state(stage), "running")
    stopped = False
    try:
        if b.worker.tracking is not None:  # track:P: publish, or wait for the version this step reads
            b.worker.tracking.start(r.start_step, r.tensors)
        executor.run(actions, first_mb=first_mb)
        store.set(protocol.actions_done(stage), "1")
        if durability is not None and durability.local_recovery and K > 1:
            # a neighbour may still need our replay buffer until every stage is done
            executor.serve_replays(lambda: store.check([protocol.COMPLETE]))
    except StopRequested:
        stopped = True
    except LinkBroken:
        if not store.check([protocol.STOP]):
            raise
        stopped = True  # a neighbour stopped and closed the link under us
    report_phase(b, launch, executor, stopped=stopped)
    if stopped:
        raise StopRequested()
    return "done"


def _microbatch_source(b: Built):
    cache: dict[int, list[dict[str, torch.Tensor]]] = {}
    m = b.cfg.train.microbatches

    def microbatch_data(mb: int) -> dict[str, torch.Tensor]:
        step, i = divmod(mb, m)
        if step not in cache:
            cache.clear()
            cache[step] = [{k: v.to(b.device) for k, v in d.items()} for d in b.setup.microbatches(step)]
        return cache[step][i]
    return microbatch_data


def report_phase(b: Built, launch: StageLaunch, executor: Executor, *, stopped: bool) -> None:
    run_dir, chunk = RunDir(launch.run_dir), b.worker.chunk
    save_final_weights(run_dir.path, launch.stage, {k: v.cpu() for k, v in chunk.trainable_state().items()},
                       step=b.worker.steps_done)
    write_json_atomic(run_dir.stage_report(launch.stage),
                      stage_report(b.cfg, launch.stage, executor, b.device, stopped=stopped,
                                   generation=launch.generation))
    b.events.close()
    if executor.loss_log is not None:
        executor.loss_log.close()


def stage_report(cfg: RunConfig, stage: int, ex: Executor, device: torch.device, *, stopped: bool,
                 generation: int) -> dict[str, Any]:
    c = ex.counters
    chunk = ex.worker.chunk
    report = {
        "stage": stage, "layers": list(chunk.layer_range), "stopped": stopped, "generation": generation,
        "steps_done": ex.worker.steps_done,
        "peak_activation_bytes": ex.meter.peak_bytes,
        "peak_inflight_microbatches": c.peak_inflight,
        "peak_rss_bytes": peak_rss_bytes(),
        "first_ns": c.first_ns, "last_ns": c.last_ns,
        "bytes_sent": c.bytes_sent, "bytes_received": c.bytes_received, "bytes_resent": c.bytes_resent,
        "trainable_bytes": sum(p.numel() * p.element_size() for p in chunk.parameters() if p.requires_grad),
        "model_bytes": sum(p.numel() * p.element_size() for p in chunk.parameters()),
        "optimizer_bytes": sum(v.numel() * v.element_size() for s in ex.worker.optimizer.state.values()
                               for v in s.values() if torch.is_tensor(v)),
    }
    if ex.ft is not None and ex.ft.replay is not None:
        report["replay_buffer_bytes"] = ex.ft.replay.nbytes()
    if ex.stash is not None:
        report["stashed_weight_versions"] = ex.stash.peak_versions
    if device.type == "cuda":
        report["peak_cuda_bytes"] = torch.cuda.max_memory_allocated(device)
    return report


def _link_broken_reason(stage: int, err: LinkBroken) -> str:
    """Name the neighbour: link k joins stage k (its upstream end) and stage k + 1. Under torchrun the
    survivor's record may be the run's first, so it must say which stage went away."""
    peer = err.link + 1 if err.link == stage else err.link
    return f"the link to stage {peer} broke ({err}); stage {peer}'s rank died or stopped answering"
