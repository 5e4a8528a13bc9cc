"""Chrome / Perfetto trace (`chrome://tracing`, ui.perfetto.dev): one track per stage.

Bounded on a long run: the last `DETAIL_STEPS` optimizer steps of every stage are there action by
action (with the activation-memory counter); every earlier step is one slice per stage ("step 41"),
spanning the step, its arguments the time spent per action kind. Recovery actions (RESTORE, RELINK,
REPLAY) are always kept whole, wherever they fall. A 20 000-step run's trace is then a few MB instead of
a quarter of a gigabyte, and the events it was made from are still there for anything finer.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from ..rundir.atomic_files import write_text_atomic
from ..vocabulary import Category, category
from .compaction import RAW_STEPS

DETAIL_STEPS = RAW_STEPS  # steps per stage drawn action by action at the end of the trace: the events
# keep single actions for those only (compaction.py)


def chrome_trace(events: Iterable[dict[str, Any]], *, stages: int, title: str = "zerolock",
                 detail_steps: int = DETAIL_STEPS) -> dict[str, Any]:
    events = list(events)
    t_origin = min((e["t0"] for e in events), default=0)
    last_step = defaultdict(int)
    for e in events:
        last_step[e["stage"]] = max(last_step[e["stage"]], e.get("step", 0))
    trace: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": title}}]
    for s in range(stages):
        trace.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": s, "args": {"name": f"stage {s}"}})
        trace.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": s, "args": {"sort_index": s}})
    summarised: dict[tuple[int, int], dict[str, Any]] = {}
    for e in events:
        step = e.get("step", 0)
        if step <= last_step[e["stage"]] - detail_steps and category(e["kind"]) != Category.RECOVERY:
            row = summarised.setdefault((e["stage"], step), {"t0": e["t0"], "t1": e["t1"], "ms": defaultdict(float)})
            row["t0"], row["t1"] = min(row["t0"], e["t0"]), max(row["t1"], e["t1"])
            row["ms"][e["kind"]] += (e["t1"] - e["t0"]) / 1e6
            continue
        name = e["kind"] if e.get("mb") is None else f"{e['kind']}{e['mb']}"
        trace.append({"name": name, "cat": e["kind"], "ph": "X", "pid": 0, "tid": e["stage"],
                      "ts": (e["t0"] - t_origin) / 1e3, "dur": max(0.0, (e["t1"] - e["t0"]) / 1e3),
                      "args": {k: e[k] for k in ("act_bytes", "inflight", "sent", "recv", "step", "gen") if k in e}})
        if "act_bytes" in e:
            trace.append({"name": "activation bytes", "ph": "C", "pid": 0, "tid": e["stage"],
                          "ts": (e["t1"] - t_origin) / 1e3, "args": {f"stage {e['stage']}": e["act_bytes"]}})
    for (stage, step), row in sorted(summarised.items()):
        trace.append({"name": f"step {step + 1}", "cat": "step", "ph": "X", "pid": 0, "tid": stage,
                      "ts": (row["t0"] - t_origin) / 1e3, "dur": max(0.0, (row["t1"] - row["t0"]) / 1e3),
                      "args": {f"{kind} ms": round(ms, 3) for kind, ms in sorted(row["ms"].items())}})
    meta = {"summarised_steps_per_stage": {str(s): max(0, last_step[s] - detail_steps + 1) for s in sorted(last_step)},
            "detail_steps": detail_steps}
    return {"traceEvents": trace, "displayTimeUnit": "ms", "otherData": meta}


def write_chrome_trace(path: str | Path, events: Iterable[dict[str, Any]], *, stages: int) -> None:
    write_text_atomic(path, json.dumps(chrome_trace(events, stages=stages), separators=(",", ":")))
