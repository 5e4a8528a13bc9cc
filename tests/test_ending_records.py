"""The record says what is on disk after every ending: `steps_done` and `resumable_from_step` are read from
the run's directory (final/ weights, verified checkpoints), never from the counts of processes that died
or were rolled back, and `resumable_from_step` is the step a `--resume` then continues from.

The first table builds each ending's directory by hand (fast); the second ends real tiny runs in each way
and resumes them (slow: two runs per case)."""
from __future__ import annotations

import errno

import pytest
import torch

from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
from zerolock_core.rundir.artifacts import save_final_weights
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.runtime.checkpoint import TENSORS, Checkpoint, CheckpointStore
from zerolock_core.runtime.finish import on_disk, resumable_step

N = 30  # the runs' steps


def cfg_for(out, *, ckpt_every: int = 2, method: str = "zerolock", steps: int = N, failures=()) -> RunConfig:
    return RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                     train=TrainConfig(runtime="pipeline", method=method, stages=2, batch=4, microbatches=2,
                                       steps=steps, threads=1, ckpt_every=ckpt_every, failures=tuple(failures),
                                       heartbeat_timeout_s=2.0, final_eval=False),
                     out=str(out))


def lay_out(rd: RunDir, *, checkpoints: list[list[int]], finals: list[int | None], corrupt: tuple[int, int] | None):
    for s, steps in enumerate(checkpoints):
        store = CheckpointStore(rd, stage=s, keep=3)
        for step in steps:
            store.save(Checkpoint(step=step, cursor=2 * step, tensors={"param/w": torch.full((4,), float(step))}))
    for s, step in enumerate(finals):
        if step is not None:
            save_final_weights(rd.path, s, {"w": torch.zeros(2)}, step=step)
    if corrupt is not None:  # a checkpoint whose tensors no longer match their manifest
        stage, step = corrupt
        path = rd.stage_checkpoints(stage) / f"step{step:08d}" / TENSORS
        path.write_bytes(path.read_bytes()[:-8])


# ending -> (checkpoint steps per stage, final/ step per stage, a corrupted checkpoint, steps last seen,
#            the record's (steps_done, resumable_from_step), finished)
ENDINGS = {
    "finished": ([[26, 28, 30], [26, 28, 30]], [30, 30], None, [30, 30], (30, None), True),
    "stopped mid-run": ([[8, 10, 12], [8, 10, 12]], [13, 13], None, [13, 13], (13, 12), False),
    "stopped at different steps": ([[8, 10, 12], [8, 10, 12]], [14, 13], None, [14, 13], (13, 12), False),
    # the rollback killed every stage: no final/ weights, and the store said 0 before the fix
    "stopped during a global rollback": ([[6, 8, 10], [6, 8, 10]], [None, None], None, [10, 10], (10, 10), False),
    "stopped during a local recovery": ([[8, 10, 12], [8, 10, 12]], [13, None], None, [13, 12], (12, 12), False),
    "disk full": ([[18, 20, 22], [16, 18, 20]], [None, None], None, [23, 21], (20, 20), False),
    "disk full, a checkpoint corrupted": ([[18, 20, 22], [16, 18, 20]], [None, None], (1, 20), [23, 21], (18, 18),
                                          False),
    "stopped in the final eval": ([[26, 28, 30], [26, 28, 30]], [30, 30], None, [30, 30], (30, 30), False),
    "trained before any checkpoint": ([[], []], [None, None], None, [1, 1], (0, 0), False),
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_the_record_counts_what_the_directory_holds_and_resume_starts_where_it_says(tmp_path, ending):
    checkpoints, finals, corrupt, seen, expected, finished = ENDINGS[ending]
    cfg = cfg_for(tmp_path)
    rd = RunDir(tmp_path)
    lay_out(rd, checkpoints=checkpoints, finals=finals, corrupt=corrupt)
    kept = on_disk(cfg, rd, known_steps=seen, finished=finished)
    assert (kept.steps_done, kept.resumable_from_step) == expected
    if not finished and min(f or 0 for f in finals) < N:  # what `--resume` restores (Run._launch)
        assert kept.resumable_from_step == resumable_step(cfg, rd)
    assert kept.resumable_from_step is None or kept.resumable_from_step <= kept.steps_done


@pytest.mark.parametrize("finals, seen, expected", [
    ([None, None], [17, 16], (16, None)),  # failed: nothing to resume; the record says how far it got
    ([17, None], [17, 16], (16, None)),
    ([30, 30], [30, 30], (30, 30)),  # stopped in the final eval: `--resume` evaluates it
])
def test_without_checkpoints_a_stage_without_final_weights_counts_the_steps_it_was_seen_at(tmp_path, finals,
                                                                                           seen, expected):
    cfg = cfg_for(tmp_path, ckpt_every=0)
    lay_out(RunDir(tmp_path), checkpoints=[], finals=finals, corrupt=None)
    kept = on_disk(cfg, RunDir(tmp_path), known_steps=seen, finished=False)
    assert (kept.steps_done, kept.resumable_from_step) == expected


def test_a_record_that_cannot_be_made_still_says_what_is_on_disk(tmp_path, monkeypatch):
    """A full disk while the record is made (curves, trace): the fallback record reads the directory."""
    from zerolock_core.jobs import pipeline_job

    cfg = cfg_for(tmp_path)
    lay_out(RunDir(tmp_path), checkpoints=[[18, 20, 22], [16, 18, 20]], finals=[None, None], corrupt=None)
    run = pipeline_job.Run(cfg)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pipeline_job.Run, "_record", full)
    run._end()
    m = RunDir(tmp_path).read_metrics()
    assert m.state == "failed" and "No space left on device" in m.reason
    assert (m.steps_done, m.resumable_from_step, m.final_steps) == (20, 20, [])


def test_curves_that_cannot_be_written_leave_the_record_whole(tmp_path, monkeypatch):
    from zerolock_core.runtime import finish

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(finish, "write_curves", full)
    cfg = cfg_for(tmp_path)
    lay_out(RunDir(tmp_path), checkpoints=[[8, 10, 12], [8, 10, 12]], finals=[13, 13], corrupt=None)
    m = finish.record(cfg, RunDir(tmp_path), finish.Ending(state="stopped", reason="stopped on request",
                                                           known_steps=[13, 13]))
    assert (m.state, m.steps_done, m.resumable_from_step) == ("stopped", 13, 12)
    assert m.telemetry_note == "curves.jsonl was not written (No space left on device)"


# ---- real endings, then `--resume` (slow) --------------------------------------------------------
DEADLINE_S = 400.0


def until(run, condition, what: str) -> None:
    """Wait on the run's own status (no sleep racing a signal: the stop is a function call, as SIGTERM's
    handler makes it)."""
    from test_fault_tolerance import _until  # the fault tests' wait (their imports are the app's: only here)

    _until(run, condition, what)


def stop_mid_run(run, monkeypatch):
    until(run, lambda st: st.steps_done >= 5, "step 5")
    run.request_stop()


def stop_during_a_global_rollback(run, monkeypatch):
    until(run, lambda st: any(r["kind"] == "global" for r in st.open_recoveries), "the rollback")
    run.request_stop()


def full_disk_while_recording(run, monkeypatch):
    from zerolock_core.jobs import pipeline_job

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    until(run, lambda st: st.steps_done >= 5, "step 5")
    monkeypatch.setattr(pipeline_job, "record", full)
    run.request_stop()


# case -> (method, failures, how it ends, the state it ends in)
REAL = {
    "stopped mid-run": ("zerolock", (), stop_mid_run, "stopped"),
    "stopped during a zb-h1 global rollback": ("zb-h1", ("1@7",), stop_during_a_global_rollback, "stopped"),
    "full disk while the record is made": ("zerolock", (), full_disk_while_recording, "failed"),
}
STEPS = 12


@pytest.fixture(scope="module")
def unfailed(tmp_path_factory):
    from zerolock_core.jobs.job import train

    cache = {}

    def get(method):
        if method not in cache:
            out = tmp_path_factory.mktemp(f"unfailed-{method}")
            m = train(cfg_for(out, method=method, steps=STEPS), progress=False)
            assert m.state == "finished" and (m.steps_done, m.resumable_from_step) == (STEPS, None)
            cache[method] = out
        return cache[method]
    return get


@pytest.mark.slow
@pytest.mark.parametrize("case", list(REAL))
def test_each_ending_records_what_resume_then_does(tmp_path, monkeypatch, unfailed, case):
    from zerolock_core.jobs.pipeline_job import Run

    method, failures, end, state = REAL[case]
    cfg = cfg_for(tmp_path, method=method, steps=STEPS, failures=failures)
    run = Run(cfg).start()
    try:
        end(run, monkeypatch)
        first = run.wait(DEADLINE_S)
    finally:
        if not run.done:
            run.stop(timeout=60)
    monkeypatch.undo()
    assert first is not None and first.state == state, first and first.reason
    assert RunDir(tmp_path).read_metrics().steps_done == first.steps_done
    on_disk_now = on_disk(cfg, RunDir(tmp_path), known_steps=[], finished=False)
    assert (first.steps_done, first.resumable_from_step) == (on_disk_now.steps_done,
                                                             on_disk_now.resumable_from_step)
    assert first.resumable_from_step is not None and first.resumable_from_step <= first.steps_done
    assert first.final_steps == on_disk_now.final_steps
    if first.final_steps:  # every stage stopped and wrote its weights
        assert first.steps_done == min(first.final_steps)
    resumed = Run(cfg, resume=True).start().wait(DEADLINE_S)
    assert resumed is not None and resumed.state == "finished", resumed and resumed.reason
    assert resumed.resumed_from_step == first.resumable_from_step
    assert (resumed.steps_done, resumed.resumable_from_step) == (STEPS, None)
    from test_fault_tolerance import assert_bitwise_equal

    assert_bitwise_equal(unfailed(method), tmp_path)
