"""The line that names the machine a result was measured on (benchmarks, the lessons' recordings), and
how busy it was."""
from __future__ import annotations

import os
import platform

from ..train.threads import available_cores


def machine_line(device: str = "cpu") -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    line = f"{cpu}, {available_cores()} cores, {platform.system()} {platform.release()}"
    if device.startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
            line += f"; GPU: {torch.cuda.device_count()} x {', '.join(names)}"
        else:
            line += "; GPU requested but none visible"
    return line


def load_average() -> list[float]:
    """The 1/5/15-minute load averages now: a load well above the core count means other work shared the
    cores, and timings measured then are slower and noisier than a quiet machine's."""
    return [round(x, 2) for x in os.getloadavg()]
