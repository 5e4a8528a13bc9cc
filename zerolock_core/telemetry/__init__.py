"""Per-stage telemetry: measured activation memory, action events, Chrome/Perfetto traces."""
from .activation_meter import ActivationMeter
from .events import Event, EventWriter, read_events
from .trace import write_chrome_trace

__all__ = ["ActivationMeter", "Event", "EventWriter", "read_events", "write_chrome_trace"]
