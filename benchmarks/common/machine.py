"""Which machine a benchmark ran on, and whether its stage processes had a core each."""

from __future__ import annotations

import socket

from zerolock_core.telemetry.machine import load_average, machine_line  # noqa: F401  (benchmarks name the machine of every result)
from zerolock_core.train.threads import available_cores


def cores() -> int:
    """CPU cores this process may run on (the affinity mask, not the host's count)."""
    return available_cores()


def oversubscribed(*, stages: int, threads: int, device: str = "cpu") -> bool:
    """More stage threads than cores: stages take turns on the cores, so bubbles stop costing time
    (docs/results.md, the fairness rule). On a GPU the compute is not on the cores, so this is never set there."""
    if device.startswith("cuda"):
        return False
    return stages * max(1, threads) > cores()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
