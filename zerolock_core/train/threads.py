"""The one thread policy: how many torch threads a process that computes takes.

Every process of a run (each stage, the reference trainer, the final evaluation, a benchmark's, the
dashboard's) takes `--threads N` torch threads, one by default. `--threads 0` is a fair share of the
cores this process may run on (its affinity mask, not the host's count) among the processes that
compute at the same time: K stage processes share them; the reference trainer and the evaluation,
which compute alone, take them all.

Why one: `zerolock bench threads` (docs/results/threads.json, 2 cores) measured the reference trainer
3 % faster with 2 threads than with 1 when alone, and 2.4x slower beside a 2-stage pipeline run (the
threads wait for each other while the other run holds the cores). A CPU laptop running the dashboard,
a run and a browser is that loaded machine. On a larger machine, measure before raising it: the same
command gives the numbers for yours.
"""
from __future__ import annotations

import os

DEFAULT_THREADS = 1


def available_cores() -> int:
    """CPU cores this process may run on (the affinity mask; the host's count where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def threads_for(requested: int, *, sharing: int = 1) -> int:
    """The torch thread count of one of `sharing` processes computing at once, `requested` unless 0."""
    if requested < 0:
        raise ValueError(f"--threads must be >= 0 (got {requested})")
    if requested > 0:
        return requested
    return max(1, available_cores() // max(1, sharing))


def pin_threads(requested: int, *, sharing: int = 1) -> int:
    """Set this process's torch threads by the policy; returns the count."""
    import torch

    threads = threads_for(requested, sharing=sharing)
    torch.set_num_threads(threads)
    return threads
