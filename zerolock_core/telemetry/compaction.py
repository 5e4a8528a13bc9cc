"""Old event files compacted: a run's events grow with its summary, not with its actions.

An event file (`events.SEGMENT_STEPS` optimizer steps) holds one line per action: K = 3, m = 4 is about
8 KB a step, 8 GB at the engine's 1,000,000-step cap. Past the last `RAW_STEPS` steps nothing reads
single actions — the Watch tab's live window is the last ~10 steps or 20 s, the trace's detail its last
`RAW_STEPS` steps, and its whole-run view, the per-stage activity and metrics.json read per-step totals —
so a segment every stage has left that far behind is rewritten as one row per (stage, step, process
generation): the time of each action kind, how many there were, the peaks they held, the bytes they moved
and their mean loss. Recovery actions (RESTORE, RELINK, REPLAY) and kinds this table does not know are
kept whole: 0.81 KB a step instead of 8.0 KB on a tiny K = 3 run (docs/cli.md, "The events, bounded").

A reader never sees the difference: `expand` turns a row back into one event per kind, laid within the
step's own span — first and last instants, busy time per kind, peaks, bytes and the mean loss
are the row's, so every total (`activity.stage_stats`, the per-step view, the trace's per-step slices,
the live loss curve) comes out the same. A compacted file starts with a `{"compacted": ...}` line and is
written to a temporary name and renamed over the segment (never half-written); only segments no process
can write again are compacted (see `compactable_below`).
"""
from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from ..vocabulary import Category, Kind, category
from .activity import wire_split

RAW_STEPS = 100  # the last steps of every stage kept action by action
FORMAT = 1
HEADER = {"compacted": FORMAT}
WIRE = ("sent", "recv", "resent", "recv_again")  # a row's bytes, as activity.wire_split splits them


def is_header(line: dict[str, Any]) -> bool:
    return "compacted" in line


def is_row(line: dict[str, Any]) -> bool:
    return "kinds" in line


def kept_whole(e: dict[str, Any]) -> bool:
    """Recovery actions and kinds this version does not know: a compacted file keeps them as they are."""
    cat = category(e["kind"])
    return cat is None or cat in (Category.RECOVERY, Category.LIFECYCLE)


def compact(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows (one per stage, step and generation) and the events kept whole, in the order they end."""
    groups: dict[tuple[int, int, int], list[dict[str, Any]]] = defaultdict(list)
    out: list[dict[str, Any]] = []
    # the bytes each action moved, split as the fold splits them (a micro-batch's first crossing, or again
    # because of a failure): a row has no micro-batches left to tell them apart. A micro-batch's sends and
    # arrivals, its replays' included, carry one step, so they lie in one segment.
    moved: dict[int, set[tuple[str, int]]] = defaultdict(set)
    for e in sorted(events, key=lambda x: x["t1"]):
        split = wire_split(e, moved[e["stage"]])
        if kept_whole(e):  # with its split: the sends it is measured against may be folded into rows
            out.append({**e, "wire": list(split)} if any(split) else e)
        else:
            groups[(e["stage"], e.get("step", 0), e.get("gen", 0))].append({**e, **dict(zip(WIRE, split))})
    out += [_row(stage, step, gen, group) for (stage, step, gen), group in groups.items()]
    out.sort(key=lambda x: x["t1"])
    return out


def _row(stage: int, step: int, gen: int, group: list[dict[str, Any]]) -> dict[str, Any]:
    kinds: dict[str, list[int]] = {}
    losses: list[float] = []
    mb = None
    for e in group:
        k = kinds.setdefault(e["kind"], [0, 0, 0, 0])  # busy ns, actions, peak act_bytes, peak inflight
        k[0] += max(0, e["t1"] - e["t0"])
        k[1] += 1
        k[2] = max(k[2], e.get("act_bytes", 0))
        k[3] = max(k[3], e.get("inflight", 0))
        if e.get("loss") is not None:
            losses.append(e["loss"])
        if mb is None and e.get("mb") is not None:
            mb = e["mb"]
    row: dict[str, Any] = {"stage": stage, "step": step, "gen": gen, "t0": min(e["t0"] for e in group),
                           "t1": max(e["t1"] for e in group), "kinds": kinds}
    rest = [e["t0"] for e in group if e["kind"] != Kind.STEP]
    if Kind.STEP in kinds and rest:  # the STEP closes step `step`; the rest works on the next one from here
        row["t0_next"] = min(rest)
    totals = {f: sum(e.get(f, 0) for e in group) for f in (*WIRE, "paced_ns", "cpu_ns")}
    row.update({f: v for f, v in totals.items() if v})
    if mb is not None:
        row["mb"] = mb
    if losses:
        row["loss"] = float(f"{sum(losses) / len(losses):.7g}")
    return row


def expand(row: dict[str, Any]) -> list[dict[str, Any]]:
    """One event per kind of a row, laid so that each step keeps its first start and last end: the first
    kind (a STEP, when there is one: it closes step `step`) at the row's start, the next step's first
    action at `t0_next`, and the other kinds end to end up to the row's end. `folded` says how many
    actions an event stands for (mb: the step's first micro-batch)."""
    order = sorted(row["kinds"], key=lambda k: k != Kind.STEP)
    spans = [row["kinds"][k][0] for k in order]
    starts, rest = [row["t0"]], spans[1:]
    if len(rest) > 1 and order[0] == Kind.STEP and "t0_next" in row:
        starts.append(row["t0_next"])
        rest = rest[1:]
    t = max(starts[-1] + spans[len(starts) - 1], row["t1"] - sum(rest))
    for span in rest:
        starts.append(t)
        t += span
    events = []
    for i, (kind, start) in enumerate(zip(order, starts)):
        ns, n, act, inflight = row["kinds"][kind]
        e = {"stage": row["stage"], "kind": kind, "mb": None if kind == Kind.STEP else row.get("mb"),
             "t0": start, "t1": start + ns, "act_bytes": act, "inflight": inflight, "sent": 0, "recv": 0,
             "step": row["step"], "gen": row["gen"], "loss": None, "paced_ns": 0, "cpu_ns": 0, "folded": n}
        if i == 0:  # the step's totals, once
            e.update({f: row.get(f, 0) for f in (*WIRE, "paced_ns", "cpu_ns")})
        if kind in (Kind.L, Kind.B) and row.get("loss") is not None:
            e["loss"] = row["loss"]
        events.append(e)
    return events


def parse_lines(data: bytes) -> list[dict[str, Any]]:
    """The events of complete lines: an action's line as it is, a row as its events, the header left out."""
    out: list[dict[str, Any]] = []
    for line in data.splitlines():
        try:
            d = json.loads(line)
        except ValueError:  # empty, or cut by a file compacted under an old cursor: nothing to give
            continue
        if is_row(d):
            out += expand(d)
        elif not is_header(d):
            out.append(d)
    return out


def compacted(path: Path) -> bool:
    """Whether the file at `path` is compacted already (its first line says so)."""
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError:
        return False
    try:
        return is_header(json.loads(first))
    except ValueError:
        return False


def compact_file(path: Path) -> int:
    """Rewrite one event file compacted; returns the bytes it saved (0: already compacted, or not written:
    a full disk keeps the actions, and says nothing — telemetry never ends a run)."""
    if compacted(path):
        return 0
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    events = parse_lines(data[:data.rfind(b"\n") + 1])
    text = "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in [HEADER, *compact(events)])
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        return 0
    return len(data) - len(text.encode())


def compactable_below(stage_steps: list[int], *, resumable: int | None) -> int:
    """The step below which no process of the run can write events any more: every stage is `RAW_STEPS`
    past it, and no restore (a rollback, a replacement, a `--resume`) goes back before `resumable`, the
    newest checkpoint every stage has (None: the run has no checkpoints, nothing restores)."""
    below = min(stage_steps, default=0) - RAW_STEPS
    return max(0, below if resumable is None else min(below, resumable))
