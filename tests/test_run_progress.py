"""What a run says while it waits: start-up phases, outages (ETA without them), the final eval."""
from __future__ import annotations

import pytest

from zerolock_core.jobs.base import JobStatus
from zerolock_core.jobs.job import progress_words
from zerolock_core.rundir.metrics import Metrics
from zerolock_core.runtime.recovery_records import RecoveryBook
from zerolock_core.config.run_config import RunConfig, TrainConfig
from zerolock_core.telemetry.lifecycle import STARTUP_PHASES, StartupClock

S = 10**9


def status(**kw):
    return JobStatus(**{"state": "running", "total_steps": 80, "elapsed_s": 75.0, **kw})


@pytest.mark.parametrize("st,expected", [
    (status(state="starting", stage_states=["loading", "importing"]),
     "starting 01:15 (0: loading, 1: importing)"),
    (status(open_recoveries=[{"stage": 1, "kind": "local", "down_s": 3.24}]),
     "stage 1 down — restarting (3.2 s); elapsed 01:15"),
    (status(state="recovering", open_recoveries=[{"stage": 0, "kind": "global", "down_s": 12.0}]),
     "stage 0 down — rolling every stage back (12.0 s); elapsed 01:15"),
    (status(state="finishing", eval_progress={"phase": "scoring", "scored": 96, "total": 256}),
     "evaluating the final weights: 96/256 examples; elapsed 01:15"),
    (status(state="finishing", eval_progress={"phase": "loading", "scored": 0, "total": None}),
     "evaluating the final weights (loading); elapsed 01:15"),
    (status(state="finishing", eval_progress={"phase": "scoring", "scored": 8, "total": 16,
                                              "what": "the weights of step 30 (1 of 9 evals)"}),
     "evaluating the weights of step 30 (1 of 9 evals): 8/16 examples; elapsed 01:15"),
    (status(s_per_step=0.5, eta_s=61.0), "running, 0.50 s/step, ETA 01:01, elapsed 01:15"),
    (status(), "running, elapsed 01:15"),
    (status(stopping=True, s_per_step=0.5, eta_s=61.0),
     "stopping: every stage finishes its current action and saves; elapsed 01:15"),
])
def test_progress_words_say_what_the_run_waits_for(st, expected):
    assert progress_words(st) == expected


def _closed(t_fail, t_end):
    return {"t_fail_ns": t_fail * S, "t_end_ns": t_end * S}


@pytest.mark.parametrize("closed,expected_s", [
    ([], 0.0),
    ([_closed(10, 13)], 3.0),
    ([_closed(10, 13), _closed(20, 21)], 4.0),
    ([_closed(10, 13), _closed(12, 15)], 5.0),  # overlapping outages count once
    ([_closed(10, 20), _closed(12, 15)], 10.0),  # one inside another
])
def test_downtime_counts_every_outage_once(closed, expected_s):
    book = RecoveryBook(RunConfig(train=TrainConfig(stages=2, ckpt_every=1)))
    book.closed = closed
    assert book.downtime_s() == pytest.approx(expected_s)


def test_startup_clock_phases_are_contiguous_and_cover_the_start_up():
    clock = StartupClock(stage=1, generation=2, spawned_ns=5)
    for phase in STARTUP_PHASES[1:]:
        clock.enter(phase)
    r = clock.record()
    assert (r["stage"], r["gen"], r["kind"], r["t0"]) == (1, 2, "STARTUP", 5)
    spans = list(r["phases"].values())
    assert list(r["phases"]) == list(STARTUP_PHASES)
    assert spans[0][0] == r["t0"] and spans[-1][1] == r["t1"]
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))


def test_the_cli_summary_states_wall_train_eval_throughput_bubble_and_peaks():
    from zerolock_core.cli import time_lines

    metrics = Metrics(config={}, state="finished", total_s=69.2, setup_s=23.4, wall_s=26.9, eval_s=18.0,
                      downtime_s=12.5, throughput_samples_per_s=11.9, bubble_fraction=0.626,
                      per_stage=[{"peak_activation_bytes": 2**19}, {"peak_activation_bytes": 2**18}])
    assert time_lines(metrics) == [
        "wall time 69.2 s: start-up 23.4 s, training 26.9 s (outages 12.5 s of it), final eval 18.0 s",
        "11.9 samples/s over the training, bubble 62.6 %",
        "peak activation memory per stage: 0.50 / 0.25 MiB"]
    reference = Metrics.from_json({"wall_s": 5.0, "samples_per_s": 40.0})  # an old reference record
    assert time_lines(reference) == ["time: start-up 0.0 s, training 5.0 s", "40.0 samples/s over the training"]


@pytest.fixture
def resumed_run(tmp_path, monkeypatch):
    """A pipeline run resumed from its step-33 checkpoints, just started: the stage processes are not
    spawned (nor is the coordinator's loop), so its status is what the coordinator knows by itself."""
    from zerolock_core.rundir.run_dir import RunDir
    from zerolock_core.jobs import pipeline_job as run_module
    from zerolock_core.runtime.supervisor import StageSupervisor

    class Lock:
        def release(self) -> None:
            pass

    monkeypatch.setattr(RunDir, "prepare_resume", lambda self, cfg: Lock())
    monkeypatch.setattr(run_module, "resumable_step", lambda cfg, rd: 33)
    monkeypatch.setattr(StageSupervisor, "spawn", lambda self, launch: None)
    monkeypatch.setattr(run_module.Run, "_watch", lambda self: None)
    cfg = RunConfig(train=TrainConfig(runtime="pipeline", stages=2, batch=4, microbatches=2, steps=80, ckpt_every=1),
                    out=str(tmp_path / "run"))
    run = run_module.Run(cfg, resume=True).start()
    yield run
    run_module._LIVE_RUNS.discard(run)


@pytest.mark.parametrize("stage_steps, done", [
    (None, 33),  # the first moment: no stage process has restored its checkpoint yet
    ([33, 33], 33),
    ([35, 34], 34),
])
def test_a_resumed_run_says_the_step_it_is_at_from_the_first_moment(resumed_run, stage_steps, done):
    from app.controller import Tracked
    from app.watch_view import status_markdown
    from zerolock_core.runtime import protocol

    for s, n in enumerate(stage_steps or []):
        resumed_run._store.set(protocol.stage_step(s), str(n))
    st = resumed_run.status()
    assert st.steps_done == done
    t = Tracked(name="run", rd=resumed_run.rd, cfg=resumed_run.cfg.to_dict(), method="zerolock", batch="",
                engine=resumed_run, state=resumed_run.state)
    assert f"step {done} / 80" in status_markdown(t, t.status())


@pytest.mark.parametrize("stage_steps, per_step, eta", [
    ([33, 33], None, None),  # nothing trained since the resume: no rate yet
    ([43, 43], 1.0, 37.0),  # 10 steps in 10 s of training: 37 steps left
    ([38, 38], 2.0, 84.0),
])
def test_a_resumed_runs_rate_counts_only_the_steps_it_trained(resumed_run, monkeypatch, stage_steps, per_step,
                                                               eta):
    from zerolock_core.runtime import protocol
    from zerolock_core.jobs import pipeline_job as run_module

    for s, n in enumerate(stage_steps):
        resumed_run._store.set(protocol.stage_step(s), str(n))
    resumed_run.state, resumed_run._t_running = "running", 100.0
    monkeypatch.setattr(run_module.time, "monotonic", lambda: 110.0)  # a fixed clock: 10 s of training
    st = resumed_run.status()
    assert (st.s_per_step, st.eta_s) == (per_step, eta)
