"""Which machine a benchmark ran on, and whether its stage processes had a core each."""

from __future__ import annotations

import platform
import socket

from zerolock_core.threads import available_cores


def cores() -> int:
    """CPU cores this process may run on (the affinity mask, not the host's count)."""
    return available_cores()


def machine_line(device: str = "cpu") -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    line = f"{cpu}, {cores()} cores, {platform.system()} {platform.release()}"
    if device.startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
            line += f"; GPU: {torch.cuda.device_count()} x {', '.join(names)}"
        else:
            line += "; GPU requested but none visible"
    return line


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
