"""Per-stage telemetry: measured activation memory, action events, Chrome/Perfetto traces.

`ActivationMeter` (torch) is imported on first use: the dashboard, the benchmarks' --help
and the notebooks read the pure-Python parts (events, lifecycle) without paying for torch.
"""
from typing import Any

from .events import Event, EventWriter, read_events
from .trace import write_chrome_trace

__all__ = ["ActivationMeter", "Event", "EventWriter", "read_events", "write_chrome_trace"]


def __getattr__(name: str) -> Any:
    if name == "ActivationMeter":
        from .activation_meter import ActivationMeter

        return ActivationMeter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
