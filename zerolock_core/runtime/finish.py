"""The end of a pipeline run, shared by the local coordinator (`Run`) and torchrun's rank 0: the final
evaluation (in a child process of its own, bounded), the trace, and the run's `Metrics` record built
from the stages' reports, their loss logs and the events of this session."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..rundir.artifacts import final_weight_step
from ..config.run_config import RunConfig
from ..rundir.atomic_files import read_json, read_json_lines
from ..rundir.loss_curves import curve_name, from_step_losses, summarise, write_curves
from ..rundir.metrics import Metrics
from ..rundir.run_dir import RunDir
from ..telemetry import read_events, write_chrome_trace
from ..telemetry.compaction import compactable_below
from ..telemetry.events import compact_old_segments
from ..telemetry.activity import bubble_fraction, makespan_s, stage_stats
from .checkpoint import CheckpointStore
from .loss_log import read_losses
from .recovery_policy import common_step

EVAL_TIMEOUT_S = 900.0


@dataclass(kw_only=True)
class Ending:
    """What the coordinator knows when a session of a run ends (everything else is read from disk)."""
    state: str  # finished | stopped | failed
    reason: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    eval: dict[str, Any] | None = None
    eval_skipped: str = ""
    since_ns: int = 0  # when this session began (its events are those from then on)
    start_step: int = 0  # the step it resumed from (throughput counts the steps trained here)
    known_steps: list[int] = field(default_factory=list)  # each stage's step as last seen (a stage may not report)
    setup_s: float = 0.0
    total_s: float = 0.0
    eval_s: float = 0.0
    downtime_s: float = 0.0
    recovery: list[dict[str, Any]] = field(default_factory=list)
    restarts: list[int] = field(default_factory=list)
    failures_not_injected: list[dict[str, Any]] = field(default_factory=list)
    stragglers: list[dict[str, Any]] = field(default_factory=list)
    resumed_from_step: int | None = None


def stage_reports(rd: RunDir, stages: int) -> list[dict[str, Any]]:
    return [r for r in (read_json(rd.stage_report(s)) for s in range(stages)) if r is not None]


def checkpoint_rejections(rd: RunDir) -> list[dict[str, Any]]:
    """Why the checkpoint loader skipped checkpoints (written by the stages, see stage_process)."""
    return read_json_lines(rd.checkpoint_log)


def resumable_step(cfg: RunConfig, rd: RunDir) -> int:
    """The newest step every stage has a verified checkpoint of: where `--resume` continues."""
    return common_step([CheckpointStore(rd, stage=s).verified_steps() for s in range(cfg.train.stages)])


@dataclass(kw_only=True, frozen=True)
class OnDisk:
    """What a run's directory holds when a session ends, whatever ended it (a stop during a rollback, a
    full disk, a crash): the record's `steps_done` and `resumable_from_step` are read here, never from
    the counts of processes that may have died since."""
    steps_done: int  # every stage holds at least this many steps: final/ weights or a verified checkpoint
    resumable_from_step: int | None  # where `--resume` continues; None: nothing to resume (finished)
    final_steps: list[int]  # the step of each chunk's final/ weights ([] if some chunk has none)

    def fields(self) -> dict[str, Any]:
        """The record's fields this fills in (`Metrics`)."""
        return {"steps_done": self.steps_done, "resumable_from_step": self.resumable_from_step,
                "final_steps": list(self.final_steps)}


def on_disk(cfg: RunConfig, rd: RunDir, *, known_steps: list[int], finished: bool) -> OnDisk:
    """Each stage's newest state on disk (its final/ weights or its newest verified checkpoint); without
    checkpoints a stage that wrote no final/ weights counts the steps it was last seen at (`known_steps`):
    nothing of it can be resumed, the record still says how far it got. `resumable_from_step`: the newest
    common verified checkpoint, or every step when only the final eval is left (what `--resume` then does)."""
    K, n = cfg.train.stages, cfg.train.steps
    finals = [final_weight_step(rd.path, s) for s in range(K)]
    checkpoints = cfg.train.ckpt_every > 0
    # (a finished run's final/ weights are all from its last step: no checkpoint is read, none hashed)
    verified = [CheckpointStore(rd, stage=s).verified_steps() if checkpoints and not finished else ()
                for s in range(K)]
    per_stage = [max([finals[s] or 0, *verified[s]]) if checkpoints or finals[s] is not None else
                 (known_steps[s] if s < len(known_steps) else 0) for s in range(K)]
    steps_done = min(per_stage, default=0)
    trained = None not in finals and min(finals or [0]) >= n  # only the eval may be left
    resumable = None if finished or not (checkpoints or trained) else n if trained else common_step(list(verified))
    return OnDisk(steps_done=steps_done, resumable_from_step=resumable,
                  final_steps=[] if None in finals else [int(f) for f in finals if f is not None])


def record(cfg: RunConfig, rd: RunDir, end: Ending) -> Metrics:
    """The run's Metrics from its files and what the coordinator knows. Writes curves.jsonl (every step
    of the loss curves; the record keeps a summary) unless the disk is full: the record says so and is
    made all the same. Compacts the event segments no later process writes again (after the trace: the
    caller writes it first)."""
    K = cfg.train.stages
    reports = {r["stage"]: r for r in stage_reports(rd, K)}
    events = [e for e in read_events(rd.event_files())[0] if e.get("t0", 0) >= end.since_ns]
    activity = stage_stats(events, stages=K)  # the dashboard computes the same, live
    wall = makespan_s(events)
    steps = [reports[s]["steps_done"] if s in reports else
             (end.known_steps[s] if s < len(end.known_steps) else 0) for s in range(K)]
    trained = min(steps) if steps else 0  # this session's processes, as last seen: the throughput's count
    kept = on_disk(cfg, rd, known_steps=steps, finished=end.state == "finished")
    samples = max(0, trained - end.start_step) * cfg.train.batch
    per_stage = [{**{k: v for k, v in reports[s].items() if k not in ("first_ns", "last_ns")},
                  "busy_s": activity[s].busy_s, "idle_s": activity[s].idle_s, "span_s": activity[s].span_s,
                  "active_fraction": activity[s].active_fraction,
                  # every process of the stage, each micro-batch once (activity.py), not the last process's
                  "bytes_sent": activity[s].bytes_sent, "bytes_received": activity[s].bytes_received,
                  "bytes_resent": activity[s].bytes_resent,
                  "bytes_received_again": activity[s].bytes_received_again} for s in sorted(reports)]
    curves = []
    for s in range(K):
        losses = read_losses(rd.stage_losses(s))
        if losses:
            curves.append(from_step_losses(curve_name(cfg.train.method, s), losses))
    note = ""
    try:
        write_curves(rd.curves, curves)
    except OSError as err:  # a full disk: the summary below is still recorded
        note = f"{rd.curves.name} was not written ({err.strerror or err})"
    summary, curves_note = summarise(curves)
    # what no later process writes again is compacted (telemetry/compaction.py): a `--resume` restores
    # `resumable_from_step` at the earliest
    compact_old_segments(rd.event_files(), below_step=compactable_below(steps, resumable=kept.resumable_from_step))
    return Metrics(
        config=cfg.to_dict(), state=end.state, reason=end.reason if end.state != "finished" else "",
        **kept.fields(), eval=end.eval, eval_history=eval_history(rd, end.eval, steps=kept.steps_done),
        eval_skipped=end.eval_skipped, throughput_samples_per_s=samples / wall if wall > 0 else 0.0,
        bubble_fraction=bubble_fraction(activity, wall), setup_s=end.setup_s, wall_s=wall, eval_s=end.eval_s,
        total_s=end.total_s, downtime_s=end.downtime_s, per_stage=per_stage, curves=summary, curves_note=curves_note,
        layers=[reports[s]["layers"] for s in sorted(reports)], errors={str(k): v for k, v in end.errors.items()},
        recovery=end.recovery, restarts=end.restarts, failures_not_injected=end.failures_not_injected,
        stragglers=end.stragglers,
        checkpoint_rejections=checkpoint_rejections(rd), resumed_from_step=end.resumed_from_step,
        telemetry_note=note)


def eval_history(rd: RunDir, final: dict[str, Any] | None, *, steps: int) -> list[dict[str, Any]]:
    """The snapshots' evals (final_eval.py), then the final one at the last step: the reference
    trainer's history, the same steps and the same records."""
    return [*(read_json(rd.eval_history) or []), *([{"step": steps, **final}] if final is not None else [])]


def write_trace(rd: RunDir, stages: int) -> None:
    events, _ = read_events(rd.event_files())
    write_chrome_trace(rd.trace, events, stages=stages)


def evaluate_in_child(cfg: RunConfig, rd: RunDir, *, start: Callable[[Callable, tuple], Any],
                      stopping: Callable[[], bool], timeout_s: float = EVAL_TIMEOUT_S) -> tuple[dict | None, str, bool]:
    """Evaluate the snapshots and the final weights in a child process (`start(target, args)` starts it:
    a standby or a fresh process), `timeout_s` for each evaluation. Returns (the eval, why there is none,
    whether that is a failure). A stop request kills the child: the eval is then skipped, not failed, and
    `--resume` runs what is left of it later."""
    from .final_eval import evaluate_run, snapshots_to_score

    timeout_s *= 1 + len(snapshots_to_score(cfg, rd))
    p = start(evaluate_run, (cfg.to_dict(), str(rd.path)))
    t0 = time.monotonic()
    while p.is_alive() and time.monotonic() - t0 < timeout_s:
        if stopping():
            p.kill()
        p.join(0.1)
    if p.is_alive():
        p.kill()
        p.join(10)
        return None, f"the final eval did not end within {timeout_s:g} s", True
    if stopping():
        return None, "stopped during the final eval: every step is trained; `--resume` evaluates it", False
    result = read_json(rd.eval)
    if p.exitcode != 0 or result is None:
        return None, f"the final eval failed (exit code {p.exitcode})", True
    return result, "", False
