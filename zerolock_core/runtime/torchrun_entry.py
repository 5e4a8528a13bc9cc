"""Run a pipeline under `torchrun`: one rank per stage, on one host or several.

    torchrun --nnodes=2 --node-rank=0 --nproc-per-node=2 --master-addr=HOST --master-port=29500 \\
        -m zerolock_core train --runtime pipeline --stages 4 --out /shared/runs/demo

Rank r runs stage r (WORLD_SIZE must equal --stages). Rank 0 hosts the rendezvous store on
MASTER_PORT + 1 and, when every stage is done, writes metrics.json and trace.json. The run
directory must be on a filesystem all hosts share (each stage writes its report and final
weights there). Unlike the local launcher, the store lives in a stage process here, so a crash
of rank 0 ends the run.
"""
from __future__ import annotations

import datetime
import os
import time
from pathlib import Path
from typing import Any

import torch.distributed as dist

from ..artifacts import write_json_atomic
from ..config import ConfigError, RunConfig
from .report import pipeline_metrics, write_trace
from .stage_process import StageLaunch, stage_main

STORE_PORT_OFFSET = 1


def under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ and "RANK" in os.environ


def train_under_torchrun(cfg: RunConfig) -> dict[str, Any] | None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if world != cfg.train.stages:
        raise ConfigError(f"torchrun started {world} ranks but --stages is {cfg.train.stages}; they must match")
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + STORE_PORT_OFFSET
    run_dir = Path(cfg.out)
    store = None
    if rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "events.jsonl").unlink(missing_ok=True)
        write_json_atomic(run_dir / "config.json", cfg.to_dict())
        store = dist.TCPStore(host, port, world_size=world + 1, is_master=True, wait_for_workers=False,
                              timeout=datetime.timedelta(seconds=300))
    t0 = time.monotonic()
    stage_main(cfg.to_dict(), StageLaunch(stage=rank, host=host, port=port, run_dir=str(run_dir)))
    if rank != 0:
        return None
    states = {}
    while True:  # rank 0: wait for every stage, then write the run's metrics
        states = {s: store.get(f"stage/{s}/state").decode() for s in range(world)
                  if store.check([f"stage/{s}/state"])}
        if len(states) == world and all(v in ("done", "stopped", "error") for v in states.values()):
            break
        time.sleep(0.2)
    errors = {s: store.get(f"stage/{s}/error").decode() for s, v in states.items() if v == "error"}
    state = "failed" if errors else ("finished" if all(v == "done" for v in states.values()) else "stopped")
    eval_block = None
    if state == "finished":
        from .evaluate_run import evaluate_run
        import json
        evaluate_run(cfg.to_dict(), str(run_dir))
        eval_block = json.loads((run_dir / "eval.json").read_text())
    metrics = pipeline_metrics(cfg, run_dir, eval_block=eval_block, state=state,
                               setup_s=time.monotonic() - t0, errors=errors)
    write_trace(run_dir, cfg.train.stages)
    write_json_atomic(run_dir / "metrics.json", metrics)
    return metrics
