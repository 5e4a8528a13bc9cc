"""A loss that becomes NaN or infinite ends the run `failed`, naming the chunk, the step and the cure, in
either runtime, before any weight takes its gradient; a chunk that trains nothing only measures it."""
from __future__ import annotations

import json
import math

import pytest
import torch

from zerolock_core.config.run_config import DataConfig, ObjectiveConfig, RunConfig, TrainConfig
from zerolock_core.jobs import pipeline_job, reference_job
from zerolock_core.jobs.job import make_job
from zerolock_core.runtime.stage_process import stage_main
from zerolock_core.train.run_setup import build_run_setup
from zerolock_core.train.stage_worker import LossNotFinite, StageWorker

DEADLINE_S = 300


def tiny(method: str, *, runtime: str = "reference", out=None, alpha: float = 1.0, **train) -> RunConfig:
    return RunConfig(data=DataConfig(seq_len=32, eval_size=8), objective=ObjectiveConfig(alpha=(alpha,)),
                     train=TrainConfig(runtime=runtime, method=method, stages=2, batch=4, microbatches=2, threads=1,
                                       **train), out=None if out is None else str(out))


# (case, method, α, the chunk whose output turns NaN, whether its loss must stop the run)
WORKER_CASES = [
    ("zerolock's first chunk, its local step", "zerolock", 1.0, 0, True),
    ("zerolock's last chunk, its consistency term too", "zerolock", 0.5, 1, True),
    ("bp's last chunk, the loss its backward starts from", "bp", 1.0, 1, True),
    ("terminal's frozen first chunk: measured, nothing trains on it", "terminal", 1.0, 0, False),
]


@pytest.mark.parametrize("case, method, alpha, index, stops", WORKER_CASES, ids=[c[0] for c in WORKER_CASES])
def test_a_loss_that_is_not_finite_stops_a_training_chunk_before_its_backward(case, method, alpha, index, stops):
    torch.manual_seed(0)
    cfg = tiny(method, alpha=alpha)
    setup = build_run_setup(cfg)
    mb = setup.microbatches(0)[0]
    chunks = setup.chunks
    with torch.no_grad():
        h_in = None if index == 0 else chunks[0](mb["input_ids"], mb["attention_mask"])
    worker = StageWorker.of_run(chunks[index], cfg)
    h = worker.forward(mb, mb["input_ids"] if h_in is None else h_in) * float("nan")
    if method == "bp":
        step = lambda: worker.bp_loss(mb, h)  # noqa: E731
    else:
        step = lambda: worker.local_backward(mb, h_in, h)  # noqa: E731
    if not stops:
        assert not math.isfinite(step().total), case
        return
    with pytest.raises(LossNotFinite) as err:
        step()
    assert str(err.value).startswith(f"chunk {index}: the loss is nan in step 1: training diverged")
    assert "--lr" in str(err.value)
    assert all(p.grad is None for p in worker.params), "a weight took the gradient of a loss that is not finite"


# ---- end to end: the stages' forward turns the last chunk's output into NaN from step POISON_STEP on ----
POISON_STEP = 2
_REAL_FORWARD = StageWorker.forward


def _forward_turning_nan(self: StageWorker, mb, x):
    h = _REAL_FORWARD(self, mb, x)
    return h * float("nan") if self.chunk.is_last and self.steps_done >= POISON_STEP else h


def _stage_main_with_nan(cfg_dict, launch):  # runs in the stage process: the patch is that process's own
    StageWorker.forward = _forward_turning_nan
    stage_main(cfg_dict, launch)


def _reference_child_with_nan(*args):  # runs in the reference trainer's child process
    StageWorker.forward = _forward_turning_nan
    reference_job.reference_child(*args)


RUN_CASES = [
    ("reference bp", dict(runtime="reference", method="bp")),
    ("pipeline zerolock, recoverable (checkpoints)", dict(runtime="pipeline", method="zerolock", ckpt_every=1)),
    ("pipeline 1f1b", dict(runtime="pipeline", method="1f1b")),
]


@pytest.mark.slow
@pytest.mark.parametrize("case, run", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_a_run_whose_loss_turns_nan_ends_failed_saying_where_and_why(tmp_path, monkeypatch, case, run):
    from test_coordinator import assert_no_process_left, children_of_this_process

    monkeypatch.setattr(pipeline_job, "stage_main", _stage_main_with_nan)
    monkeypatch.setattr(reference_job, "reference_child", _reference_child_with_nan)
    before = {p.pid for p in children_of_this_process()}
    run = dict(run)
    cfg = tiny(run.pop("method"), runtime=run.pop("runtime"), out=tmp_path, steps=6, final_eval=False, **run)
    job = make_job(cfg).start()
    metrics = job.wait(timeout=DEADLINE_S)
    assert job.done, f"{case}: the run did not end within {DEADLINE_S} s"
    assert metrics.state == "failed", (case, metrics.state, metrics.reason)
    # the stage's own words, named by the coordinator where it supervises recovery
    assert metrics.reason.removeprefix("stage 1 failed: ").startswith(
        f"LossNotFinite: chunk 1: the loss is nan in step {POISON_STEP + 1}: training diverged"), metrics.reason
    assert metrics.steps_done == POISON_STEP and not any(metrics.restarts or [0]), (case, metrics.restarts)
    assert json.loads((tmp_path / "metrics.json").read_text())["state"] == "failed"
    assert_no_process_left(before)
