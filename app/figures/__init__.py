"""Plotly figure builders for live runs, recorded runs and the schedule simulator.

Plain functions over event dicts (the lines of a run's event files), usable from notebooks:

    from app.figures import timeline_figure, memory_figure, simulated_events, KIND_COLOURS
    events, _ = zerolock_core.telemetry.read_events(RunDir("runs/demo").event_files())
    timeline_figure(events, stages=3, title="ZeroLock K=3").show()
"""
from __future__ import annotations

from .compare import Series, compare_memory_figure, compare_summary_figure, compare_timeline_figure
from .memory import MemoryGrid, memory_figure, memory_grid
from zerolock_core.viz.palette import KIND_COLOURS, KIND_LABELS, METHOD_COLOURS, STAGE_COLOURS
from .training import activity_figure, training_figure
from .simulated import events_from_simulation, simulated_events
from .timeline import WEBGL_THRESHOLD, lane_bars, timeline_figure

__all__ = [
    "KIND_COLOURS", "KIND_LABELS", "METHOD_COLOURS", "STAGE_COLOURS", "WEBGL_THRESHOLD",
    "MemoryGrid", "Series",
    "activity_figure", "compare_memory_figure", "compare_summary_figure", "compare_timeline_figure",
    "events_from_simulation", "lane_bars", "memory_figure", "memory_grid", "simulated_events",
    "timeline_figure", "training_figure",
]
