"""Which machine a benchmark ran on, and whether its stage processes had a core each."""

from __future__ import annotations

import random
import socket
from pathlib import Path

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


LOWEST_PORT = 10_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_low() -> int:
    """The lowest port the OS hands out to outgoing connections (32768 where /proc does not say)."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(*, block: int = 1) -> int:
    """The first of `block` consecutive TCP ports free on 127.0.0.1 now, below the ephemeral range: a port
    the OS picked (bind to 0) can be handed, before its user binds it, to any process's outgoing
    connection, which then makes the bind fail with EADDRINUSE on a busy machine."""
    high = _ephemeral_low() - block
    rng = random.SystemRandom()
    for _ in range(1_000 if high > LOWEST_PORT else 0):
        port = rng.randrange(LOWEST_PORT, high)
        if all(_bindable(port + i) for i in range(block)):
            return port
    for _ in range(1_000):  # no room below the ephemeral range (or all taken): let the OS pick
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + block <= 65_536 and all(_bindable(port + i) for i in range(1, block)):
            return port
    raise OSError(f"no {block} consecutive free TCP ports on 127.0.0.1")
