"""Deterministic kernels on request, in every process of a run: `ZEROLOCK_DETERMINISTIC=1` in the environment
(stage processes inherit it) makes each process call `torch.use_deterministic_algorithms` before it computes.
The GPU check (`zerolock bench gpu`) uses it to compare a CUDA pipeline with a single-process CUDA reference
bitwise; on CPU the kernels are deterministic already."""
from __future__ import annotations

import os

ENV = "ZEROLOCK_DETERMINISTIC"
# cuBLAS is deterministic only with a fixed workspace (read when its handle is created, so set before the
# first matmul): https://docs.nvidia.com/cuda/cublas/#results-reproducibility
CUBLAS_ENV, CUBLAS_WORKSPACE = "CUBLAS_WORKSPACE_CONFIG", ":4096:8"


def deterministic_env(on: bool) -> dict[str, str]:
    """The environment entries that switch deterministic kernels on (empty when `on` is false)."""
    return {ENV: "1", CUBLAS_ENV: CUBLAS_WORKSPACE} if on else {}


def apply_from_env() -> bool:
    """Deterministic kernels in this process if the environment asks for them; whether it did. An op with no
    deterministic kernel warns instead of failing (warn_only): a bitwise comparison then shows what it cost."""
    import torch

    on = os.environ.get(ENV) == "1"
    if on:
        os.environ.setdefault(CUBLAS_ENV, CUBLAS_WORKSPACE)
    torch.use_deterministic_algorithms(on, warn_only=True)
    return on
