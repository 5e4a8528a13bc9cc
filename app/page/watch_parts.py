"""The Watch tab's parts and view choices: one definition for the page's script (element ids, the
window radio's values) and the server (what it builds for each part)."""
from __future__ import annotations

# part -> the id of the element that holds it (the page's script draws into its HOLDER_CLASS child)
PARTS = {"timeline": "timeline", "memory": "memory", "training": "training", "activity": "activity",
         "table": "stage-table", "status": "status-json"}
PLOT_PARTS = ("timeline", "memory", "training", "activity")  # plotly figures; "table" is HTML, "status" JSON
HOLDER_CLASS = "zerolock-holder"

# what the timeline and memory charts show: the window radio's values
RECENT, WHOLE, FAILURE = "recent actions", "whole run", "around the last failure"
UNITS = {"MiB": "act_bytes", "micro-batches held": "inflight"}  # memory chart: the unit radio's value -> event field
WINDOW_ID, UNIT_ID, JUMP_ID = "watch-window", "memory-unit", "jump-to-failure"


def check_parts(parts: list[str]) -> list[str]:
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ValueError(f"unknown Watch part(s) {unknown}: choose from {list(PARTS)}")
    return parts
