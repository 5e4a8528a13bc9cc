"""What each piece of a chunk costs on this machine, measured: the numbers `--boundaries auto` balances.

`measure_chunk_costs(cfg)` loads the run's model with its LoRA adapters and times one micro-batch of the
run's own training data (its rows, its sequence length) through every piece a chunk is made of, forward
and backward as a training step runs them: each decoder layer, the embedding, the readout head (norm +
LM head at the answer positions + the loss) and the head's forward alone (what a local objective's
consistency term recomputes of the upstream chunk). Each piece runs `repeats` times after a warm-up;
its cost is the median.

Layers of the same shapes do the same arithmetic, so the spread among their medians is the timer's and
the machine's noise: left in, it would move a cut wherever two splits tie. Each layer's cost is the
median over every layer of its shape (`pooled`); what each layer measured on its own is kept beside it.
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..method.balance import ChunkCosts
from ..config.run_config import RunConfig, TrainConfig

WARMUP, REPEATS = 1, 5


@dataclass(frozen=True, kw_only=True)
class MeasuredCosts:
    costs: ChunkCosts  # seconds per micro-batch, each layer's pooled over the layers of its shape
    each_layer_s: tuple[float, ...]  # each layer's own median, before pooling
    rows: int  # the micro-batch's rows and sequence length
    seq_len: int
    repeats: int
    threads: int
    device: str
    measure_s: float = field(default=0.0)  # what measuring took, model loading included

    def to_dict(self) -> dict[str, Any]:
        c = self.costs
        return {"layer_s": list(c.layers), "each_layer_s": list(self.each_layer_s), "embedding_s": c.embedding,
                "head_s": c.head, "upstream_head_s": c.upstream_head, "rows": self.rows, "seq_len": self.seq_len,
                "repeats": self.repeats, "threads": self.threads, "device": self.device,
                "measure_s": self.measure_s}


def measure_chunk_costs(cfg: RunConfig, *, repeats: int = REPEATS) -> MeasuredCosts:
    """Time every piece of the model's chunks on one micro-batch of `cfg`'s training data, with the torch
    threads one stage of the run takes (threads.py); this process's thread count is restored after."""
    from .run_setup import build_run_setup
    from .stage_worker import answer_positions
    from .threads import threads_for
    from ..method.objectives import task_cross_entropy

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 (got {repeats})")
    t_begin = time.perf_counter()
    t = cfg.train
    # the whole model as one chunk, with what measuring needs of the run and nothing of its pipeline (its
    # faults, links and speeds belong to stages that do not exist here)
    whole = RunConfig(model=dataclasses.replace(cfg.model, boundaries=None, readout="head"), data=cfg.data,
                      train=TrainConfig(runtime="reference", method="bp", stages=1, batch=t.batch,
                                        microbatches=t.microbatches, seed=t.seed, device=t.device,
                                        threads=t.threads))
    setup = build_run_setup(whole)
    (chunk,) = setup.chunks
    device = torch.device(cfg.train.device)
    chunk.to(device)
    mb = {k: v.to(device) for k, v in setup.microbatches(0)[0].items()}
    mask, ids = mb["attention_mask"], mb["input_ids"]
    omega, targets = answer_positions(mb)
    threads_before = torch.get_num_threads()
    threads = threads_for(cfg.train.threads, sharing=cfg.train.stages)
    torch.set_num_threads(threads)
    try:
        from ..method.chunks import run_layers

        with torch.no_grad():
            inputs = [chunk.embed(ids)]
            for h in chunk.layer_outputs(ids, mask):
                inputs.append(h)
        grad = torch.randn(inputs[0].shape, generator=torch.Generator().manual_seed(0)).to(inputs[0])

        def layer_step(name: str) -> Callable[[], None]:
            one = torch.nn.ModuleDict({name: chunk.layers[name]})

            def step() -> None:
                x = inputs[int(name) - chunk.layer_range[0]].detach().requires_grad_(True)
                for y in run_layers(one, x, mask, config=chunk.config, rotary=chunk.rotary):
                    y.backward(grad)
            return step

        def embedding_step() -> None:
            with torch.no_grad():
                chunk.embed(ids)

        def head_step() -> None:
            x = inputs[-1].detach().requires_grad_(True)
            task_cross_entropy(chunk.readout(x, omega, mask), targets).backward()

        def upstream_head_step() -> None:
            with torch.no_grad():
                chunk.readout(inputs[-1], omega, mask)

        names = list(chunk.layers)
        steps = [layer_step(n) for n in names] + [embedding_step, head_step, upstream_head_step]
        medians = _medians(steps, repeats=repeats, device=device)
        chunk.zero_grad(set_to_none=True)
    finally:
        torch.set_num_threads(threads_before)
    each_layer = tuple(medians[:len(names)])
    costs = ChunkCosts(layers=_pooled_by_shape([chunk.layers[n] for n in names], each_layer),
                       embedding=medians[-3], head=medians[-2], upstream_head=medians[-1])
    return MeasuredCosts(costs=costs, each_layer_s=each_layer, rows=int(ids.shape[0]), seq_len=int(ids.shape[1]),
                         repeats=repeats, threads=threads, device=str(device),
                         measure_s=time.perf_counter() - t_begin)


def _medians(steps: list[Callable[[], None]], *, repeats: int, device: torch.device) -> list[float]:
    """Each step's median seconds over `repeats` rounds (after WARMUP rounds), the steps interleaved within a
    round so that a slow moment of the machine falls on all of them alike."""
    times: list[list[float]] = [[] for _ in steps]
    for round_ in range(WARMUP + repeats):
        for i, step in enumerate(steps):
            _synchronize(device)
            t0 = time.perf_counter_ns()
            step()
            _synchronize(device)
            if round_ >= WARMUP:
                times[i].append((time.perf_counter_ns() - t0) / 1e9)
    return [statistics.median(t) for t in times]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _pooled_by_shape(layers: list[torch.nn.Module], each: tuple[float, ...]) -> tuple[float, ...]:
    """Each layer's cost: the median of the costs of every layer whose parameters have its names, shapes and
    trainability (the same arithmetic)."""
    def shape(layer: torch.nn.Module) -> tuple:
        return tuple((n, tuple(p.shape), p.dtype, p.requires_grad) for n, p in layer.named_parameters())

    groups: dict[tuple, list[float]] = {}
    keys = [shape(layer) for layer in layers]
    for key, cost in zip(keys, each):
        groups.setdefault(key, []).append(cost)
    return tuple(statistics.median(groups[key]) for key in keys)
