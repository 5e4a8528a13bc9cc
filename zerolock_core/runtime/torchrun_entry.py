"""Run a pipeline under `torchrun`: one rank per stage, on one host or several.

    torchrun --nnodes=2 --node-rank=0 --nproc-per-node=2 --master-addr=HOST --master-port=29500 \\
        -m zerolock_core train --runtime pipeline --stages 4 --ckpt-every 10 --out /shared/runs/demo

Rank r runs stage r (WORLD_SIZE must equal --stages). Rank 0 hosts the rendezvous store on
MASTER_PORT + 1, holds the run directory's lock, tells every rank which checkpoint step to start
from, and, when every stage is done, writes metrics.json and trace.json. The run directory must be on
a filesystem all hosts share (each stage writes its checkpoints, report and final weights there).

Fault tolerance is torchrun's: nobody respawns a single rank here. When a rank dies, its
neighbours' links break, every stage stops, rank 0 writes a `failed` metrics.json naming the
stage, and the job exits non-zero within seconds; ranks whose store host died exit on their own.
With `--max-restarts N` torchrun then starts the workers again, and a restarted job resumes from
the newest step every stage has a verified checkpoint of — as `--resume` does by hand.

**Sessions.** Each start of the job is a session, numbered by torchrun's restart count; rank 0
writes its number into its store, and every per-process key is scoped by it (`protocol.heartbeat(s,
session)`). With several nodes, torchrun restarts a failed node's workers without the other nodes
noticing: a restarted rank may find the store of the *previous* session still up, its rank 0
still waiting for the dead worker. It must never pass for that worker — it would start afresh
(no resume step for it) and its heartbeats would hide the failure. Instead it tells that session to
stop (the reason names it), waits for that store to go (rank 0 ends `failed`, and torchrun restarts
it too) and joins the next session, which resumes from the checkpoints.
"""
from __future__ import annotations

import datetime
import json
import os
import threading
import time
from typing import Any

import torch.distributed as dist

from ..train.auto_boundaries import resolve_auto_boundaries
from ..config.field_words import ConfigError
from ..config.run_config import RunConfig, replace
from ..rundir.atomic_files import read_json
from ..rundir.metrics import Metrics
from ..rundir.run_dir import RunDir, RunLock
from . import protocol
from .finish import Ending, record, resumable_step, write_trace
from .stage_process import STORE_TIMEOUT_S, StageLaunch, stage_main

STORE_PORT_OFFSET = 1
END_TIMEOUT_S = 600.0  # rank 0 waits at most this long, without any change, for the other stages to end
NEXT_SESSION_TIMEOUT_S = 300.0  # a restarted rank waits this long for the next session's store


def under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ and "RANK" in os.environ


def restart_count() -> int:
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def train_under_torchrun(cfg: RunConfig, *, overwrite: bool = False, resume: bool = False) -> Metrics | None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if world != cfg.train.stages:
        raise ConfigError(f"torchrun started {world} ranks but --stages is {cfg.train.stages}; they must match")
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + STORE_PORT_OFFSET
    rd, session = RunDir(cfg.out), restart_count()
    timeout = datetime.timedelta(seconds=STORE_TIMEOUT_S)
    lock: RunLock | None = None
    if rank == 0:
        store = dist.TCPStore(host, port, world_size=world + 1, is_master=True, wait_for_workers=False,
                              timeout=timeout)
        store.set(protocol.SESSION, str(session))
        try:
            cfg, lock, step = _prepare(rd, cfg, overwrite=overwrite, resume=resume or session > 0)
        except ConfigError as err:
            store.set(protocol.REFUSED, str(err))
            time.sleep(1.0)  # let the other ranks read why before the store goes
            raise
        store.set(protocol.BOUNDARIES, json.dumps(cfg.model.boundaries))
        store.set(protocol.RESUME_STEP, str(-1 if step is None else step))
    else:
        store = _join_session(host, port, rank, session)
    t0, t0_ns = time.monotonic(), time.monotonic_ns()
    step = _agreed_step(store)
    if rank != 0:  # `--boundaries auto` as rank 0 resolved it (measured once, for every rank)
        boundaries = json.loads(protocol.get_str(store, protocol.BOUNDARIES, "null"))
        cfg = replace(cfg, model={"boundaries": None if boundaries is None else tuple(boundaries)})
    launch = StageLaunch(stage=rank, host=host, port=port, run_dir=str(rd.path), restore_step=step,
                         coordinated=False, generation=session)
    if rank != 0:
        stage_main(cfg.to_dict(), launch)
        return None
    watch = RankWatch(host, port, world, session=session, timeout_s=cfg.train.heartbeat_timeout_s)
    try:
        try:
            stage_main(cfg.to_dict(), launch)
        except SystemExit:  # our own stage failed: its error is in the store; the report still gets written
            pass
        return _report(store, cfg, rd, t0=t0, since_ns=t0_ns, start_step=step or 0)
    finally:
        watch.close()
        if lock is not None:
            lock.release()


def _join_session(host: str, port: int, rank: int, session: int) -> dist.Store:
    """A client of this session's store. A store of an earlier session (its rank 0 still running, not
    restarted) is told to stop, and the next one is waited for (bounded)."""
    timeout = datetime.timedelta(seconds=STORE_TIMEOUT_S)
    deadline = time.monotonic() + NEXT_SESSION_TIMEOUT_S
    told = False
    while True:
        store = dist.TCPStore(host, port, is_master=False, timeout=timeout)
        theirs = int(protocol.wait_for(store, protocol.SESSION, timeout_s=STORE_TIMEOUT_S,
                                       what="rank 0 to start its session", heed_stop=False))
        if theirs == session:
            return store
        if theirs > session:
            raise ConfigError(f"rank {rank} is from torchrun's restart {session}, but the job is at restart "
                              f"{theirs}: this worker is stale")
        if not told:  # the previous session's rank 0 still waits for our predecessor: end it
            why = (f"rank {rank} (stage {rank}) was restarted by torchrun (restart {session}): the job restarts "
                   f"from its newest common checkpoint")
            store.set(protocol.stage_error(rank), why)
            store.set(protocol.stage_state(rank), "error")
            store.set(protocol.STOP, why)
            told = True
        while time.monotonic() < deadline:  # until that store goes with its rank 0
            try:
                store.check([protocol.SESSION])
            except Exception:
                break
            time.sleep(0.2)
        del store
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: the previous session's store did not go within "
                               f"{NEXT_SESSION_TIMEOUT_S:g} s")


class RankWatch:
    """Rank 0 watches the other ranks' heartbeats (this session's): a rank that dies while its
    neighbours wait on the store (flow control) breaks no link, so nothing else would notice. Its stage
    is marked failed and every stage is asked to stop; the job then ends with that reason."""

    def __init__(self, host: str, port: int, world: int, *, session: int, timeout_s: float) -> None:
        self._store = dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=30))
        self._world, self._session, self._timeout = world, session, timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="zerolock-rank-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        seen: dict[int, tuple[int, float]] = {}
        while not self._stop.wait(0.2):
            try:
                for s in range(1, self._world):
                    state = protocol.get_str(self._store, protocol.stage_state(s), "")
                    beats = protocol.get_int(self._store, protocol.heartbeat(s, self._session), -1)
                    if state in ("done", "stopped", "error", "link-lost") or beats < 0:
                        continue
                    now = time.monotonic()
                    if seen.get(s, (None,))[0] != beats:
                        seen[s] = (beats, now)
                    elif now - seen[s][1] > self._timeout:
                        self._store.set(protocol.stage_error(s), f"rank {s} (stage {s}) sent no heartbeat for "
                                                                 f"{self._timeout:g} s: its process died or hung")
                        self._store.set(protocol.stage_state(s), "error")
                        self._store.set(protocol.STOP, f"rank {s} lost")
                        return
            except Exception:  # the store is going away with the job
                return

    def close(self) -> None:
        self._stop.set()


def _prepare(rd: RunDir, cfg: RunConfig, *, overwrite: bool,
             resume: bool) -> tuple[RunConfig, RunLock, int | None]:
    """Rank 0: the run's config (`--boundaries auto` resolved), its directory locked and made ready, and the
    step every stage restores (None: afresh)."""
    if resume and cfg.train.ckpt_every > 0 and rd.config_json.exists():
        cfg, _ = resolve_auto_boundaries(cfg, made_with=rd.saved_config())
        lock = rd.prepare_resume(cfg)
        return cfg, lock, resumable_step(cfg, rd)
    cfg, balance = resolve_auto_boundaries(cfg)
    return cfg, rd.prepare_fresh(cfg, overwrite=overwrite or resume, balance=balance), None


def _agreed_step(store: dist.Store) -> int | None:
    t0 = time.monotonic()
    while not store.check([protocol.RESUME_STEP]):
        if store.check([protocol.REFUSED]):
            raise ConfigError(store.get(protocol.REFUSED).decode())
        if time.monotonic() - t0 > STORE_TIMEOUT_S:
            raise TimeoutError(f"rank 0 did not prepare the run within {STORE_TIMEOUT_S:g} s")
        time.sleep(0.05)
    step = int(store.get(protocol.RESUME_STEP))
    return None if step < 0 else step


def _report(store: dist.Store, cfg: RunConfig, rd: RunDir, *, t0: float, since_ns: int,
            start_step: int) -> Metrics:
    """Rank 0, after its own stage: wait (bounded) for every stage to end, then write the record."""
    world = cfg.train.stages
    last, changed = None, time.monotonic()
    while True:
        states = {s: protocol.get_str(store, protocol.stage_state(s), "") for s in range(world)}
        if all(v in ("done", "stopped", "error", "link-lost") for v in states.values()):
            break
        if states != last:
            last, changed = states, time.monotonic()
        if time.monotonic() - changed > END_TIMEOUT_S:
            states = {s: (v if v in ("done", "stopped", "error") else f"{v or 'no word'} (gave up waiting)")
                      for s, v in states.items()}
            break
        time.sleep(0.2)
    errors = {str(s): protocol.get_str(store, protocol.stage_error(s), v) for s, v in states.items()
              if v not in ("done", "stopped")}
    state = "failed" if errors else ("finished" if all(v == "done" for v in states.values()) else "stopped")
    eval_, eval_s = None, 0.0
    if state == "finished" and cfg.train.final_eval:
        from .final_eval import evaluate_run

        t_eval = time.monotonic()
        evaluate_run(cfg.to_dict(), str(rd.path))
        eval_, eval_s = read_json(rd.eval), time.monotonic() - t_eval
    first = next(iter(errors.values()), "")
    write_trace(rd, cfg.train.stages)  # before the record compacts the old events
    metrics = record(cfg, rd, Ending(
        state=state, reason=first.strip().splitlines()[0] if first else "", errors=errors, eval=eval_,
        eval_skipped="" if eval_ is not None else ("not evaluated (final_eval is off)" if state == "finished"
                                                   else "the run did not finish: not evaluated"),
        since_ns=since_ns, start_step=start_step, setup_s=time.monotonic() - t0, eval_s=eval_s,
        total_s=time.monotonic() - t0, resumed_from_step=start_step or None))
    rd.write_metrics(metrics)
    return metrics
