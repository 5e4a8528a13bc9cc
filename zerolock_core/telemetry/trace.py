"""Chrome / Perfetto trace (`chrome://tracing`, ui.perfetto.dev): one track per stage."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable


def chrome_trace(events: Iterable[dict[str, Any]], *, stages: int, title: str = "zerolock") -> dict[str, Any]:
    events = list(events)
    t_origin = min((e["t0"] for e in events), default=0)
    trace: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": title}}]
    for s in range(stages):
        trace.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": s, "args": {"name": f"stage {s}"}})
        trace.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": s, "args": {"sort_index": s}})
    for e in events:
        name = e["kind"] if e.get("mb") is None else f"{e['kind']}{e['mb']}"
        trace.append({"name": name, "cat": e["kind"], "ph": "X", "pid": 0, "tid": e["stage"],
                      "ts": (e["t0"] - t_origin) / 1e3, "dur": max(0.0, (e["t1"] - e["t0"]) / 1e3),
                      "args": {k: e[k] for k in ("act_bytes", "inflight", "sent", "recv", "step", "gen") if k in e}})
        if "act_bytes" in e:
            trace.append({"name": "activation bytes", "ph": "C", "pid": 0, "tid": e["stage"],
                          "ts": (e["t1"] - t_origin) / 1e3, "args": {f"stage {e['stage']}": e["act_bytes"]}})
    return {"traceEvents": trace, "displayTimeUnit": "ms"}


def write_chrome_trace(path: str | Path, events: Iterable[dict[str, Any]], *, stages: int) -> None:
    Path(path).write_text(json.dumps(chrome_trace(events, stages=stages)))
