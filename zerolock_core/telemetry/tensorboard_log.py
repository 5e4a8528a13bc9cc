"""TensorBoard event files of a run (`--tensorboard`), written from its record when the record is written.

`RunDir.write_metrics`, the one writer of metrics.json for every runtime (the reference trainer, the
pipeline's coordinator, torchrun's rank 0), hands this module the record and the run's per-step loss
rows (curves.jsonl). What it logs (`run_points`):

    loss/NAME, task_loss/NAME, kl/NAME   per chunk (NAME: chunk0.., or global under backprop), every step
    eval/label_accuracy, eval/token_accuracy, eval/nll (the model's) and .../chunkK, at each eval
    perf/throughput_samples_per_s, perf/bubble_fraction, memory/peak_activation_bytes/stageS at the end
    recovery (text)                      one line per recovered failure

A session writes one event file. A resumed session (`resumed_from_step` R > 0) logs steps > R only and
opens its file with TensorBoard's purge step R + 1: what the stopped session logged past its checkpoint
is dropped by every reader, so each step shows once. Files are named so that a later session's file sorts
after the earlier ones (TensorBoard reads a folder's files in name order), and each is written aside and
moved in whole: nothing half-written is left in the folder.

A leaf: it imports nothing of the engine (the run directory calls it from below every room), and
torch.utils.tensorboard only when it writes: the `tensorboard` package is an optional extra.
"""
from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INSTALL = "pip install tensorboard"  # or: pip install -e ".[tensorboard]"
_SERIES = (("loss", "loss"), ("task", "task_loss"), ("consistency", "kl"))  # curves.jsonl's key -> tag
_EVAL_KEYS = ("label_accuracy", "token_accuracy", "nll")
_NAME = re.compile(r"^events\.out\.tfevents\.(\d{10})\.")
_WRITING = ".tensorboard-writing"  # the folder a session's file is written in before it is moved in


@dataclass(kw_only=True, frozen=True)
class Point:
    """One thing logged: a scalar (`value`) or a text (`text`) under `tag` at `step`."""
    tag: str
    step: int
    value: float | None = None
    text: str | None = None


def tensorboard_on(config: dict[str, Any]) -> bool:
    """Whether a run of this config (`RunConfig.to_dict()`, as its record keeps it) asked for TensorBoard logs."""
    return bool(config.get("train", {}).get("tensorboard", False))


def tensorboard_missing() -> str | None:
    """Why TensorBoard logs cannot be written here (one line), or None when they can."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401  (needs the tensorboard package)
    except ImportError as err:
        return f"TensorBoard logs need the tensorboard package ({INSTALL}): {err}"
    return None


def session_start(record: dict[str, Any]) -> int:
    """The step this session of the run began at (0 for a fresh run)."""
    return int(record.get("resumed_from_step") or 0)


def _rows_of_curves(curves: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """metrics.json's curves (a summary) as curves.jsonl's rows: only when curves.jsonl is missing."""
    rows: dict[int, dict[str, Any]] = {}
    for c in curves:
        for i, step in enumerate(c.get("step", [])):
            rows.setdefault(step, {"step": step})[c["chunk"]] = {key: c[key][i] for key, _ in _SERIES if key in c}
    return [rows[s] for s in sorted(rows)]


def _recovery_step(r: dict[str, Any], fallback: int) -> int:
    """The step a recovery is shown at: its rollback step, else the step of its scheduled failure
    ("1@3:kill"), else the session's last step."""
    if r.get("rollback_step") is not None:
        return int(r["rollback_step"])
    m = re.match(r"^\d+@(\d+)", str(r.get("failure", "")))
    return int(m.group(1)) if m else fallback


def _recovery_text(r: dict[str, Any]) -> str:
    words = [f"stage {r.get('stage')}", f"{r.get('mode', '?')} ({r.get('failure', '?')})",
             f"{r.get('kind', '?')} recovery"]
    if r.get("total_s") is not None:
        words.append(f"{float(r['total_s']):.2f} s")
    if r.get("replayed_microbatches"):
        words.append(f"{r['replayed_microbatches']} micro-batches replayed")
    if r.get("interrupted"):
        words.append("interrupted")
    if r.get("reason"):
        words.append(str(r["reason"]))
    return ": ".join(words[:2]) + ", " + ", ".join(words[2:])


def run_points(record: dict[str, Any], rows: list[dict[str, Any]]) -> list[Point]:
    """Everything this session logs: `record` is metrics.json's, `rows` curves.jsonl's (every step; the
    record's summarised curves when empty). Steps at or before the session's start are left out (an
    earlier session logged them); the evals and recoveries are this session's own."""
    start, done = session_start(record), int(record.get("steps_done") or 0)
    points: list[Point] = []
    for row in rows or _rows_of_curves(record.get("curves") or []):
        step = int(row["step"])
        if step <= start:
            continue
        for name, values in row.items():
            if name == "step" or not isinstance(values, dict):
                continue
            points += [Point(tag=f"{tag}/{name}", step=step, value=float(values[key]))
                       for key, tag in _SERIES if values.get(key) is not None]
    evals = {int(e["step"]): e for e in record.get("eval_history") or [] if "step" in e}
    if record.get("eval") is not None and done not in evals:
        evals[done] = record["eval"]
    for step, e in sorted(evals.items()):
        points += [Point(tag=f"eval/{key}", step=step, value=float(e[key])) for key in _EVAL_KEYS
                   if e.get(key) is not None]
        points += [Point(tag=f"eval/{key}/chunk{c['chunk']}", step=step, value=float(c[key]))
                   for c in e.get("per_chunk") or [] for key in _EVAL_KEYS if c.get(key) is not None]
    if done > start:  # a session that trained (one that only evaluated has no rate)
        points.append(Point(tag="perf/throughput_samples_per_s", step=done,
                            value=float(record.get("throughput_samples_per_s") or 0.0)))
        if record.get("bubble_fraction") is not None:
            points.append(Point(tag="perf/bubble_fraction", step=done, value=float(record["bubble_fraction"])))
        points += [Point(tag=f"memory/peak_activation_bytes/stage{s['stage']}", step=done,
                         value=float(s["peak_activation_bytes"]))
                   for s in record.get("per_stage") or [] if s.get("peak_activation_bytes") is not None]
    points += [Point(tag="recovery", step=_recovery_step(r, done), text=_recovery_text(r))
               for r in record.get("recovery") or []]
    return points


def _next_name(folder: Path) -> str:
    """An event file name that sorts after every file already in `folder` (TensorBoard's name order)."""
    earlier = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    stamps = [int(m.group(1)) for n in earlier if (m := _NAME.match(n))]
    stamp = max([int(time.time()), *stamps])
    return f"events.out.tfevents.{stamp:010d}.zerolock.{len(stamps):04d}"


def write_run_events(log_dir: Path, record: dict[str, Any], rows: list[dict[str, Any]]) -> Path | None:
    """Write this session's points (`run_points`) as one new event file in `log_dir`; None (nothing
    written) when the run did not ask for TensorBoard logs. Raises ImportError without the package, and
    OSError when the disk refuses: the caller notes it (the run's record matters more)."""
    if not tensorboard_on(record.get("config", {})):
        return None
    from torch.utils.tensorboard import SummaryWriter

    start = session_start(record)
    aside = log_dir.parent / _WRITING
    shutil.rmtree(aside, ignore_errors=True)  # a writer killed mid-write (the run's lock makes it gone)
    try:
        # purge_step: readers drop the earlier sessions' points from this step on (the rolled-back steps)
        writer = SummaryWriter(log_dir=str(aside), purge_step=start + 1 if start else None, flush_secs=3600)
        try:
            for p in run_points(record, rows):
                if p.text is not None:
                    writer.add_text(p.tag, p.text, global_step=p.step)
                else:
                    writer.add_scalar(p.tag, p.value, global_step=p.step)
        finally:
            writer.close()
        written = [f for f in aside.iterdir() if "tfevents" in f.name]
        assert len(written) == 1, written  # one SummaryWriter, one file
        log_dir.mkdir(parents=True, exist_ok=True)
        target = log_dir / _next_name(log_dir)
        written[0].replace(target)
        return target
    finally:
        shutil.rmtree(aside, ignore_errors=True)
