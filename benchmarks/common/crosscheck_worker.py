"""One rank of the torch.distributed.pipelining cross-check (spawned; 2 ranks, gloo, CPU).

The stage modules are our own `Chunk`s; only the schedule and the transport are torch's. Every
rank builds the same run setup as our stage processes do, so it holds the whole dataset:

* the attention mask is *closed over*: each stage reads the mask of micro-batch i from its own
  copy of the data when its i-th forward of the step runs (ScheduleGPipe, Schedule1F1B and, with one stage
  per rank, ScheduleInterleavedZeroBubble run
  a stage's forwards in micro-batch order; stage 0 checks that its input is micro-batch i's ids).
  Our engine does the same (every stage rebuilds masks from its own data); nothing but the hidden
  state travels, in both implementations, so the bytes on the wire are the same;
* the labels travel as the schedule's `target`, which torch splits per micro-batch and hands to
  the loss function on the last stage: task_cross_entropy(chunk.readout(h, Ω), targets).
"""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from zerolock_core.config.run_config import RunConfig
from zerolock_core.method.objectives import task_cross_entropy
from zerolock_core.train.stage_worker import StageWorker, answer_positions
from zerolock_core.train.run_setup import build_run_setup

SCHEDULES = ("gpipe", "1f1b", "zb-h1")  # zb-h1: torch's ScheduleInterleavedZeroBubble, one stage per rank


class MaskedStage(nn.Module):
    """A chunk whose i-th forward call in a step uses micro-batch i's attention mask."""

    def __init__(self, chunk: nn.Module) -> None:
        super().__init__()
        self.chunk = chunk
        self.batches: list[dict[str, torch.Tensor]] = []
        self.calls = 0

    def start_step(self, batches: list[dict[str, torch.Tensor]]) -> None:
        self.batches, self.calls = batches, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mb = self.batches[self.calls]
        if self.chunk.is_first and not torch.equal(x, mb["input_ids"]):
            raise RuntimeError(f"forward {self.calls} did not get micro-batch {self.calls}'s input ids")
        self.calls += 1
        return self.chunk(x, mb["attention_mask"])


def _schedule(name: str, stage, microbatches: int, loss_fn):
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe, ScheduleInterleavedZeroBubble

    if name == "zb-h1":  # a multi-stage schedule: a list of this rank's stages (one here)
        return ScheduleInterleavedZeroBubble([stage], microbatches, loss_fn=loss_fn, scale_grads=True)
    cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[name]
    return cls(stage, microbatches, loss_fn=loss_fn, scale_grads=True)


def run_rank(rank: int, cfg_dict: dict[str, Any], port: int, out_dir: str, schedules: tuple[str, ...]) -> None:
    """Runs every schedule in `schedules` from the same initial weights, `steps` steps each."""
    from torch.distributed.pipelining import PipelineStage

    cfg = RunConfig.from_dict(cfg_dict)
    t = cfg.train
    torch.set_num_threads(max(1, t.threads))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=120))
    results: dict[str, Any] = {}
    try:
        for name in schedules:
            setup = build_run_setup(cfg)  # fresh: every schedule starts from the same weights
            chunk = setup.chunks[rank]
            worker = StageWorker(chunk=chunk, alpha=1.0, consistency="reverse", microbatches=t.microbatches, lr=t.lr,
                                 weight_decay=t.weight_decay)
            module = MaskedStage(chunk)
            first = setup.microbatches(0)[0]
            # static shapes and dtypes for torch's stage (no shape-inference forward)
            hidden = torch.zeros(first["input_ids"].shape[0], cfg.data.seq_len, chunk.config.hidden_size,
                                 requires_grad=True)
            stage = PipelineStage(module, rank, 2, torch.device("cpu"),
                                  input_args=(first["input_ids"],) if rank == 0 else (hidden,), output_args=(hidden,))

            def loss_fn(h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
                omega, targets = answer_positions({"labels": labels})
                return task_cross_entropy(chunk.readout(h, omega), targets)

            # every rank gets the loss function: torch decides from it whether the schedule has a
            # backward at all (with None on stage 0, stage 0 runs forward-only under no_grad)
            sched = _schedule(name, stage, t.microbatches, loss_fn)
            losses: list[float] = []
            ends: list[float] = []
            dist.barrier()
            t0 = time.perf_counter()
            for step in range(t.steps):
                batches = setup.microbatches(step)
                module.start_step(batches)
                if rank == 0:
                    sched.step(torch.cat([b["input_ids"] for b in batches]))
                else:
                    mb_losses: list[torch.Tensor] = []
                    sched.step(target=torch.cat([b["labels"] for b in batches]), losses=mb_losses)
                    losses.append(float(torch.stack([x.detach() for x in mb_losses]).mean()))
                worker.optimizer_step()
                ends.append(time.perf_counter() - t0)
                if module.calls != t.microbatches:
                    raise RuntimeError(f"{name}: stage {rank} ran {module.calls} forwards, expected {t.microbatches}")
            dist.barrier()
            results[name] = {"losses": losses, "step_end_s": ends, "total_s": time.perf_counter() - t0}
        dist.barrier()
    finally:
        dist.destroy_process_group()
    (Path(out_dir) / f"torch_pipelining_rank{rank}.json").write_text(json.dumps(results))
