"""A reference run's checkpoints, in the pipeline's format (rundir/checkpoints.py): chunk k's trainable
tensors, its optimizer's state and the RNG in `checkpoints/stage{k}/step{N}/`, each committed by its
manifest. A step counts once every chunk has it verified (a crash between two chunks' commits leaves the
step before). What else determines the rest of the run rides in the last chunk's meta: the loss curves
and the eval curve so far, so that a resumed run records what an unstopped one does. The data cursor is
the step itself: a step's batch depends only on (seed, step) (`data.microbatches`).
"""
from __future__ import annotations

from typing import Any

from ..rundir.checkpoints import CheckpointStore, capture, newest_common_step, restore
from ..rundir.loss_curves import LossCurves
from ..rundir.run_dir import RunDir
from .stage_worker import StageWorker

RUN_STATE = "reference_run"  # the last chunk's meta key: {"curves": LossCurves.to_json(), "eval_history": [...]}


def save_checkpoint(rd: RunDir, workers: list[StageWorker], *, step: int, curves: LossCurves,
                    eval_history: list[dict[str, Any]], keep: int) -> None:
    """Every chunk's checkpoint at `step`, the last chunk's last (it carries the run's records)."""
    last = len(workers) - 1
    for k, w in enumerate(workers):
        extra = {RUN_STATE: {"curves": curves.to_json(), "eval_history": eval_history}} if k == last else None
        ckpt = capture(params=w.chunk.trainable_state(), optimizer=w.optimizer, step=step, cursor=step,
                       extra_meta=extra, extra_tensors=w.tracking.checkpoint_tensors(step) if w.tracking else None)
        CheckpointStore(rd, stage=k, keep=keep).save(ckpt)


def resumable_step(rd: RunDir, *, chunks: int) -> int | None:
    """The newest step every chunk has a verified checkpoint of (None: nothing to resume from)."""
    return newest_common_step(rd, stages=chunks)


def load_checkpoint(rd: RunDir, workers: list[StageWorker], *, curves: LossCurves,
                    eval_history: list[dict[str, Any]]) -> int:
    """Restore the newest common checkpoint into `workers`, `curves` and `eval_history` (in place);
    the step it holds (0, and nothing touched, when there is none: the run starts over). A `track:P`
    run's tracking starts there (the last chunk's first: it publishes what the others load)."""
    step = resumable_step(rd, chunks=len(workers))
    if step is None:
        return 0
    saved = {}
    for k, w in enumerate(workers):
        ckpt = CheckpointStore(rd, stage=k).load_latest(at_most=step)
        assert ckpt is not None and ckpt.step == step, "a verified common step loads on every chunk"
        restore(ckpt, params=w.chunk.trainable_state(), optimizer=w.optimizer)
        w.steps_done = step  # an α ramp reads it
        saved[k] = ckpt.tensors
        if k == len(workers) - 1:
            state = ckpt.meta[RUN_STATE]
            _restore_curves(curves, state["curves"])
            eval_history[:] = state["eval_history"]
    start_tracking(workers, step, saved)
    return step


def start_tracking(workers: list[StageWorker], step: int, saved: dict[int, dict] | None = None) -> None:
    """`track:P`: the last chunk publishes (what its checkpoint kept, and where it stands), then the chunks
    before it load the version their step reads."""
    for k in sorted(range(len(workers)), key=lambda k: k != len(workers) - 1):
        if workers[k].tracking is not None:
            workers[k].tracking.start(step, (saved or {}).get(k))


def _restore_curves(curves: LossCurves, saved: list[dict[str, Any]]) -> None:
    by_name = {c["chunk"]: c for c in saved}
    assert set(by_name) == set(curves.names), "a checkpoint of this config holds its curves"
    curves.steps = list(saved[0]["step"]) if saved else []
    for name, series in curves.values.items():
        for key in series:
            series[key] = list(by_name[name][key])
