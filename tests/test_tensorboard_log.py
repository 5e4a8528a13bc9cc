"""`--tensorboard`: the run's record written as TensorBoard events (telemetry/tensorboard_log.py), read back
with TensorBoard's own reader — each chunk's losses at every step, the evals, throughput, bubble, memory,
recoveries as text — and a stopped pipeline run resumed appends to the same folder: steps continue, none
twice."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from zerolock_core.config.field_words import CLI, ConfigError, render  # noqa: E402
from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig  # noqa: E402
from zerolock_core.rundir.run_dir import RunDir  # noqa: E402
from zerolock_core.telemetry.tensorboard_log import Point, run_points, write_run_events  # noqa: E402

DEADLINE_S = 300.0


def cfg_for(out: Path, *, runtime: str, steps: int, tensorboard: bool = True, **train) -> RunConfig:
    return RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                     train=TrainConfig(runtime=runtime, method="zerolock", stages=2, batch=4, microbatches=2,
                                       steps=steps, threads=1, tensorboard=tensorboard, **train),
                     out=str(out))


def read_back(run: Path) -> EventAccumulator:
    acc = EventAccumulator(str(RunDir(run).tensorboard))
    acc.Reload()
    return acc


def steps_of(acc: EventAccumulator, tag: str) -> list[int]:
    return [e.step for e in acc.Scalars(tag)]


# ---- what a record logs (no run) -------------------------------------------------------------------
def record(**fields) -> dict:
    return {"config": {"train": {"tensorboard": True}}, "steps_done": 3, "throughput_samples_per_s": 10.0,
            "per_stage": [{"stage": 0, "peak_activation_bytes": 100}, {"stage": 1, "peak_activation_bytes": 200}],
            "bubble_fraction": 0.25, **fields}


ROWS = [{"step": s, "chunk0": {"loss": 1.0 * s, "task": 1.0 * s, "consistency": None},
         "chunk1": {"loss": 2.0 * s, "task": 3.0 * s, "consistency": 0.5}} for s in (1, 2, 3)]
EVAL = {"label_accuracy": 0.5, "token_accuracy": 0.25, "nll": 2.0,
        "per_chunk": [{"chunk": 0, "label_accuracy": 0.4}, {"chunk": 1, "label_accuracy": 0.5}]}


@pytest.mark.parametrize("case, rec, expected", [
    ("a fresh run logs every step of each chunk's losses, KL where recorded",
     record(), {"loss/chunk0": [1, 2, 3], "task_loss/chunk1": [1, 2, 3], "kl/chunk1": [1, 2, 3], "kl/chunk0": None}),
    ("the end's numbers at the last step",
     record(), {"perf/throughput_samples_per_s": [3], "perf/bubble_fraction": [3],
                "memory/peak_activation_bytes/stage1": [3]}),
    ("every eval at its step, the final one once",
     record(eval=EVAL, eval_history=[{"step": 2, **EVAL}, {"step": 3, **EVAL}]),
     {"eval/label_accuracy": [2, 3], "eval/token_accuracy": [2, 3], "eval/label_accuracy/chunk0": [2, 3]}),
    ("a resumed session logs only the steps after its start",
     record(resumed_from_step=2), {"loss/chunk0": [3], "perf/throughput_samples_per_s": [3]}),
    ("a resumed session that only evaluated logs the eval, no rate",
     record(resumed_from_step=3, eval=EVAL), {"loss/chunk0": None, "perf/throughput_samples_per_s": None,
                                              "eval/nll": [3]}),
    ("a reference run has no bubble",
     record(bubble_fraction=None), {"perf/bubble_fraction": None}),
])
def test_a_record_logs_each_tag_at_its_steps(case, rec, expected):
    points = run_points(rec, ROWS)
    for tag, steps in expected.items():
        got = [p.step for p in points if p.tag == tag]
        assert got == (steps or []), (case, tag)


@pytest.mark.parametrize("recovery, step", [
    ({"stage": 1, "mode": "kill", "failure": "1@7:kill", "kind": "local", "total_s": 1.5}, 7),
    ({"stage": 0, "mode": "kill", "failure": "api:kill:1", "kind": "global", "rollback_step": 4}, 4),
    ({"stage": 0, "mode": "kill", "failure": "api:kill:1", "kind": "local"}, 3),  # no step of its own: the end's
])
def test_a_recovery_is_one_text_at_its_failures_step(recovery, step):
    texts = [p for p in run_points(record(recovery=[recovery]), ROWS) if p.text is not None]
    assert [(p.tag, p.step) for p in texts] == [("recovery", step)]
    assert f"stage {recovery['stage']}" in texts[0].text and recovery["kind"] in texts[0].text


def test_the_records_curves_stand_in_when_curves_jsonl_is_missing():
    curves = [{"chunk": "chunk0", "step": [1, 2], "loss": [1.0, 2.0], "task": [1.0, 2.0], "consistency": [None, None]}]
    assert [p for p in run_points(record(curves=curves, per_stage=[]), []) if p.tag.startswith("loss/")] == [
        Point(tag="loss/chunk0", step=1, value=1.0), Point(tag="loss/chunk0", step=2, value=2.0)]


def test_a_run_without_tensorboard_writes_nothing(tmp_path):
    assert write_run_events(tmp_path / "tb", {"config": {"train": {"tensorboard": False}}}, ROWS) is None
    assert list(tmp_path.iterdir()) == []


def test_each_session_adds_a_file_that_sorts_after_the_earlier_ones(tmp_path):
    """TensorBoard reads a folder's files in name order: a resumed session's must come last, even
    within the same second; nothing is left beside them."""
    first = write_run_events(tmp_path / "tb", record(steps_done=2), ROWS[:2])
    second = write_run_events(tmp_path / "tb", record(resumed_from_step=1), ROWS)
    assert first is not None and second is not None and first.name < second.name
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(["tb", first.name, second.name])
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert steps_of(acc, "loss/chunk0") == [1, 2, 3]  # the first session's step 2 purged: logged once
    assert steps_of(acc, "perf/throughput_samples_per_s") == [3]


def test_asking_for_tensorboard_without_the_package_is_refused_in_one_line(tmp_path, monkeypatch):
    from zerolock_core.train import preflight

    monkeypatch.setattr(preflight, "tensorboard_missing", lambda: "TensorBoard logs need the tensorboard package")
    with pytest.raises(ConfigError) as err:
        preflight.preflight(cfg_for(tmp_path, runtime="reference", steps=2))
    said = render(err.value, CLI)
    assert said.startswith("--tensorboard: ") and "\n" not in said
    preflight.preflight(cfg_for(tmp_path, runtime="reference", steps=2, tensorboard=False))  # off: not asked


# ---- real runs -------------------------------------------------------------------------------------
def test_a_reference_run_logs_each_chunks_losses_and_its_evals(tmp_path):
    from zerolock_core.train.reference_trainer import train_reference

    m = train_reference(cfg_for(tmp_path, runtime="reference", steps=3, eval_every=2), progress=False)
    assert m.state == "finished" and m.telemetry_note == ""
    acc = read_back(tmp_path)
    for chunk in ("chunk0", "chunk1"):
        assert steps_of(acc, f"loss/{chunk}") == steps_of(acc, f"task_loss/{chunk}") == [1, 2, 3]
        assert steps_of(acc, f"eval/label_accuracy/{chunk}") == [2, 3]
    assert steps_of(acc, "kl/chunk1") == [1, 2, 3] and "kl/chunk0" not in acc.Tags()["scalars"]  # chunk 0 has no KL
    assert [e.value for e in acc.Scalars("loss/chunk1")] == pytest.approx(m.curves[1]["loss"])
    assert [e.value for e in acc.Scalars("eval/label_accuracy")][-1] == pytest.approx(m.eval["label_accuracy"])
    assert steps_of(acc, "perf/throughput_samples_per_s") == [3]


def _until(run, condition, what: str) -> None:
    t0 = time.monotonic()
    while not condition(run.status()):
        assert not run.done, f"the run ended before {what}: {run.metrics and run.metrics.reason}"
        assert time.monotonic() - t0 < DEADLINE_S, f"waited {DEADLINE_S:g} s for {what}"
        time.sleep(0.02)


@pytest.mark.slow
def test_a_stopped_pipeline_run_resumed_appends_its_steps_once(tmp_path):
    from zerolock_core.jobs.pipeline_job import Run

    steps = 12
    # slowed stages: the stop lands well before the last step whatever the machine's load
    cfg = cfg_for(tmp_path, runtime="pipeline", steps=steps, ckpt_every=2, stage_speed=(0.2,))
    run = Run(cfg).start()
    try:
        _until(run, lambda st: st.steps_done >= 3, "step 3")
        run.request_stop()
        first = run.wait(DEADLINE_S)
    finally:
        if not run.done:
            run.stop(timeout=60)
    assert first is not None and first.state == "stopped", first and first.reason
    logged = steps_of(read_back(tmp_path), "loss/chunk1")
    assert logged == list(range(1, len(logged) + 1)) and len(logged) >= 3

    resumed = Run(cfg, resume=True).start().wait(DEADLINE_S)
    assert resumed is not None and resumed.state == "finished", resumed and resumed.reason
    assert len(list(RunDir(tmp_path).tensorboard.iterdir())) == 2  # one file per session, in the same folder
    acc = read_back(tmp_path)
    for tag in ("loss/chunk0", "loss/chunk1", "task_loss/chunk1", "kl/chunk1"):
        assert steps_of(acc, tag) == list(range(1, steps + 1)), tag  # continued, none twice
    assert steps_of(acc, "eval/label_accuracy") == [steps]
    for tag in ("perf/bubble_fraction", "memory/peak_activation_bytes/stage0"):
        # each session's end at its last step: the stopped one's is kept only where no step was rolled back
        ends = steps_of(acc, tag)
        assert ends[-1] == steps and ends == sorted(set(ends)) and len(ends) <= 2, (tag, ends)
