"""The memory a run needs at least, from its config and its model's shape, and what this machine has
available: preflight.py refuses a run that cannot fit before a stage starts, instead of the kernel's OOM
killer ending it (and everything else on the machine) later.

A floor, not a forecast: the frozen weights each process holds, the trained adapters with their
gradients and AdamW's moments, and the activations one micro-batch keeps for its backward pass through
a chunk — batch / m × seq × what autograd saves per token in a layer (layer_counts.layer_activations, the
count the dashboard's memory calculator uses too). The interpreter, torch itself, the rotary tables and
schedules that hold several micro-batches at once come on top.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..config.field_words import shown
from .layer_counts import embedding_weights, layer_activations, layer_weights, lora_weights
from .model_shape import ModelShape

BYTES_PER_VALUE = 4  # float32: every process computes in it (models/loading.py)
TRAINED_COPIES = 4  # a trained value, its gradient and AdamW's two moments
MEMINFO = Path("/proc/meminfo")
CGROUP = Path("/sys/fs/cgroup")  # v2: memory.max and memory.current of this process's group


@dataclass(kw_only=True, frozen=True)
class MemoryNeed:
    """Bytes, summed over the processes of a run on this machine."""
    processes: int
    weights: int  # the frozen base model's
    trained: int  # LoRA and the readout adapters, with their gradients and optimizer state
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.trained + self.activations


def memory_need(shape: ModelShape, chunk_layers: list[int], *, processes: int, micro_batch: int, seq_len: int,
                lora_rank: int, lora_targets: tuple[str, ...], readout_inner: int) -> MemoryNeed:
    """The floor for `processes` processes on this machine: one per chunk of `chunk_layers` (a pipeline's
    stages, the largest first), or one holding every chunk (processes = 1 with several chunks: the
    reference runtime, which runs them one after another). `readout_inner`: the mlp readout's width (0: none).
    `shape` must be `sized`."""
    assert shape.sized, shape
    h, vocab = shape.hidden, embedding_weights(shape)  # vocab: the embedding's (and a head's) parameters
    per_layer = layer_weights(shape)
    lora_per_layer = lora_weights(shape, lora_rank, lora_targets)
    readout = 2 * h * readout_inner
    per_token_layer = layer_activations(shape, lora_rank, lora_targets)
    largest_first = sorted(chunk_layers, reverse=True)
    if processes == 1:  # every chunk in one process; a chunk's activations are freed by its backward
        layers = sum(chunk_layers)
        weights = layers * per_layer + 2 * vocab  # + the embedding and the head
        trained = layers * lora_per_layer + len(chunk_layers) * readout
        activations = micro_batch * seq_len * largest_first[0] * per_token_layer
    else:  # each stage: its layers, the head (every chunk reads out), the embedding on one of them
        local = largest_first[:processes]
        embedding = vocab if len(local) == len(chunk_layers) else 0  # under torchrun: maybe another host's
        weights = sum(local) * per_layer + len(local) * vocab + embedding
        trained = sum(local) * lora_per_layer + len(local) * readout
        activations = micro_batch * seq_len * sum(local) * per_token_layer
    return MemoryNeed(processes=min(processes, len(chunk_layers)) or 1, weights=weights * BYTES_PER_VALUE,
                      trained=trained * TRAINED_COPIES * BYTES_PER_VALUE, activations=activations * BYTES_PER_VALUE)


def available_memory() -> int | None:
    """Bytes this process may still allocate: the kernel's MemAvailable, less where this process's cgroup
    (a container's limit) leaves less; None where neither can be read."""
    found = []
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = (CGROUP / "memory.max").read_text().strip()
        if limit != "max":
            found.append(max(0, int(limit) - int((CGROUP / "memory.current").read_text())))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def local_processes(stages: int, runtime: str) -> int:
    """The run's processes on this machine: one for the reference runtime; a pipeline's stages, or under
    torchrun the ranks of this host (LOCAL_WORLD_SIZE)."""
    if runtime != "pipeline":
        return 1
    try:
        return min(stages, int(os.environ["LOCAL_WORLD_SIZE"]))
    except (KeyError, ValueError):
        return stages


def gib(n: int) -> str:
    """Bytes in a message: "12 MiB", "3.4 GiB", "4.35e+26 GiB" (the need of an absurd batch, in short)."""
    if n < 2**30 // 10:
        return f"{n / 2**20:.0f} MiB"
    whole = n // 2**30  # an int: no float overflows, however large
    return f"{n / 2**30:.1f} GiB" if whole < 10**6 else f"{shown(whole)} GiB"
