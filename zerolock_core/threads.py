"""The one thread policy: how many torch threads a process that computes takes.

`--threads N` (N > 0) is taken as given, by every process of the run. `--threads 0`, the default,
is a fair share of the cores this process may run on (its affinity mask, not the host's count)
among the processes that compute at the same time: K stage processes share them; the reference
trainer and the final evaluation, which compute alone, take them all. `zerolock bench threads`
measures what a count costs and gains (docs/results/threads.json; the README's Fairness section).
"""
from __future__ import annotations

import os


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
