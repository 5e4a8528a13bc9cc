"""Run a pipeline under `torchrun`: one rank per stage, on one host or several.

    torchrun --nnodes=2 --node-rank=0 --nproc-per-node=2 --master-addr=HOST --master-port=29500 \\
        -m zerolock_core train --runtime pipeline --stages 4 --ckpt-every 10 --out /shared/runs/demo

Rank r runs stage r (WORLD_SIZE must equal --stages). Rank 0 hosts the rendezvous store on
MASTER_PORT + 1, checks the run directory, tells every rank which checkpoint step to start from,
and, when every stage is done, writes metrics.json and trace.json. The run directory must be on a
filesystem all hosts share (each stage writes its checkpoints, report and final weights there).

Fault tolerance is torchrun's: nobody respawns a single rank here. When a rank dies, its
neighbours' links break, every stage stops, rank 0 writes a `failed` metrics.json naming the
stage, and the job exits non-zero within seconds; ranks whose store host died exit on their own.
With `--max-restarts N` torchrun then starts the whole job again, and a restarted job
(TORCHELASTIC_RESTART_COUNT > 0) resumes from the newest step every stage has a verified
checkpoint of — as `--resume` does by hand.
"""
from __future__ import annotations

import datetime
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import torch.distributed as dist

from ..artifacts import write_json_atomic
from ..config import ConfigError, RunConfig
from . import protocol, run_dir
from .checkpoint import CheckpointStore
from .recovery_policy import common_step
from .report import pipeline_metrics, write_trace
from .stage_process import STORE_TIMEOUT_S, StageLaunch, stage_main

STORE_PORT_OFFSET = 1
END_TIMEOUT_S = 600.0  # rank 0 waits at most this long, without any change, for the other stages to end


def under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ and "RANK" in os.environ


def restart_count() -> int:
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def train_under_torchrun(cfg: RunConfig, *, overwrite: bool = False, resume: bool = False) -> dict[str, Any] | None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if world != cfg.train.stages:
        raise ConfigError(f"torchrun started {world} ranks but --stages is {cfg.train.stages}; they must match")
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + STORE_PORT_OFFSET
    d = Path(cfg.out)
    timeout = datetime.timedelta(seconds=STORE_TIMEOUT_S)
    if rank == 0:
        store = dist.TCPStore(host, port, world_size=world + 1, is_master=True, wait_for_workers=False,
                              timeout=timeout)
        try:
            step = _prepare(d, cfg, overwrite=overwrite, resume=resume or restart_count() > 0)
        except ConfigError as err:
            store.set(protocol.REFUSED, str(err))
            time.sleep(1.0)  # let the other ranks read why before the store goes
            raise
        store.set(protocol.RESUME_STEP, str(-1 if step is None else step))
    else:
        store = dist.TCPStore(host, port, is_master=False, timeout=timeout)
    t0, t0_ns = time.monotonic(), time.monotonic_ns()
    step = _agreed_step(store)
    launch = StageLaunch(stage=rank, host=host, port=port, run_dir=str(d), restore_step=step, coordinated=False)
    if rank != 0:
        stage_main(cfg.to_dict(), launch)
        return None
    watch = RankWatch(host, port, world, timeout_s=cfg.train.heartbeat_timeout_s)
    try:
        stage_main(cfg.to_dict(), launch)
    except SystemExit:  # our own stage failed: its error is in the store; the report still gets written
        pass
    try:
        return _report(store, cfg, d, t0=t0, since_ns=t0_ns, start_step=step or 0)
    finally:
        watch.close()


class RankWatch:
    """Rank 0 watches the other ranks' heartbeats: a rank that dies while its neighbours wait on the
    store (flow control) breaks no link, so nothing else would notice. Its stage is marked failed and
    every stage is asked to stop; the job then ends with that reason."""

    def __init__(self, host: str, port: int, world: int, *, timeout_s: float) -> None:
        self._store = dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=30))
        self._world, self._timeout = world, timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="zerolock-rank-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        seen: dict[int, tuple[int, float]] = {}
        while not self._stop.wait(0.2):
            try:
                for s in range(1, self._world):
                    state = protocol.get_str(self._store, protocol.stage_state(s), "")
                    beats = protocol.get_int(self._store, protocol.heartbeat(s, 0), -1)
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


def _prepare(d: Path, cfg: RunConfig, *, overwrite: bool, resume: bool) -> int | None:
    """Rank 0: the run directory made ready; the step every stage restores (None: a fresh start)."""
    if resume and cfg.train.ckpt_every > 0 and (d / run_dir.CONFIG).exists():
        run_dir.check_resumable(d, cfg)
        return common_step([CheckpointStore(d / "checkpoints", stage=s).verified_steps()
                            for s in range(cfg.train.stages)])
    run_dir.prepare_fresh(d, cfg, overwrite=overwrite or resume)
    write_json_atomic(d / run_dir.CONFIG, cfg.to_dict())
    return None


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


def _report(store: dist.Store, cfg: RunConfig, d: Path, *, t0: float, since_ns: int,
            start_step: int) -> dict[str, Any]:
    """Rank 0, after its own stage: wait (bounded) for every stage to end, then write the metrics."""
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
    errors = {s: protocol.get_str(store, protocol.stage_error(s), v) for s, v in states.items()
              if v not in ("done", "stopped")}
    state = "failed" if errors else ("finished" if all(v == "done" for v in states.values()) else "stopped")
    eval_block = None
    if state == "finished" and cfg.train.final_eval:
        from .final_eval import evaluate_run
        evaluate_run(cfg.to_dict(), str(d))
        eval_block = json.loads((d / "eval.json").read_text())
    metrics = pipeline_metrics(cfg, d, eval_block=eval_block, state=state, setup_s=time.monotonic() - t0,
                               errors=errors, since_ns=since_ns, start_step=start_step)
    first = next(iter(errors.values()), "")
    metrics["reason"] = first.strip().splitlines()[0] if first else ""
    if start_step:
        metrics["resumed_from_step"] = start_step
    write_trace(d, cfg.train.stages)
    write_json_atomic(d / run_dir.METRICS, metrics)
    return metrics
