"""Benchmarks take the same `--model` values as runs; presets live in `zerolock_core.models`."""
from __future__ import annotations


def resolve_bench_model(spec: str) -> str:
    """A preset name -> its directory (built on first use); anything else unchanged. The loader (torch)
    is imported here, not at the top: `zerolock bench NAME --help` must not pay for it."""
    from zerolock_core.models.loading import resolve_model
    from zerolock_core.models.presets import PRESETS

    return resolve_model(spec) if spec in PRESETS and spec != "tiny" else spec
