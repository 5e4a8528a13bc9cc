"""Failures on real processes: every case ends bitwise equal to the unfailed run, or is refused up front.

The full matrix — mode (kill, stop, post-step, mid-ckpt) x stage (first, middle, last) x method
(zerolock: local replay; 1f1b and gpipe: global rollback), plus the combined cases — is the
`matrix` tier (`pytest -m matrix`, about 30 min on 2 cores) and `zerolock bench faults`; the CI
tier runs a representative subset that includes every case that ever hung. The harness fails a
case that does not end within its deadline: it never waits forever.
"""
import json
import os
import signal
import time

import pytest
import torch

from app.recovery_text import recovery_text
from app.figures.timebase import time_origin, to_s
from app.figures.timeline import timeline_figure
from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.cli import recovery_lines
from zerolock_core.runtime.recovery_phases import (INSTANTS, PHASES, field, phase_seconds, phases_from_instants, phases_text,
                                           seconds_text)
from zerolock_core.telemetry.events import read_events
from benchmarks.faults import (CI_CASES, DEADLINE_S, MATRIX_CASES, STEPS, case_config,
                                        run_with_deadline)
from zerolock_core.config.field_words import ConfigError
from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.jobs.pipeline_job import Run
from zerolock_core.telemetry.activity import bubble_fraction, makespan_s, stage_stats
from zerolock_core.telemetry.lifecycle import STARTUP_PHASES, read_lifecycle

pytestmark = pytest.mark.slow


def cfg_for(out, *, method="zerolock", failures=(), stages=3, ckpt_every=2, steps=STEPS):
    return case_config(out, method=method, failures=failures, stages=stages, ckpt_every=ckpt_every, steps=steps)


def run_to_the_end(cfg) -> dict:
    """Run with a deadline: a case that does not end fails (and its processes are ended)."""
    metrics, ended = run_with_deadline(cfg)
    if not ended:
        pytest.fail(f"the run did not end within {DEADLINE_S:g} s: {metrics}")
    return metrics


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    root = tmp_path_factory.mktemp("baseline")
    cache = {}

    def get(method):
        if method not in cache:
            cache[method] = (root / method, run_to_the_end(cfg_for(root / method, method=method)))
        return cache[method]
    return get


def assert_bitwise_equal(a_dir, b_dir):
    a, b = load_final_weights(a_dir), load_final_weights(b_dir)
    assert a and sorted(a) == sorted(b)
    for k in a:
        for name in a[k]:
            assert torch.equal(a[k][name], b[k][name]), (k, name)


def check_recovered(tmp_path, baselines, method, failures, metrics):
    assert metrics.state == "finished", metrics.reason
    assert metrics.steps_done == STEPS and metrics.failures_not_injected == []
    # ZeroLock falls back to a global rollback when a second failure takes what a local recovery under way
    # needed (whether it does depends on how far that recovery got when the second one fired: timing); the
    # local recovery it cut short is recorded as interrupted, and the run must still end bitwise equal
    fell_back = method == "zerolock" and any(r["kind"] == "global" and r.get("fallback") for r in metrics.recovery)
    kind = "local" if method == "zerolock" and not fell_back else "global"
    assert len(metrics.recovery) == len(failures)
    assert sorted(r["failure"] for r in metrics.recovery) == sorted(failures)
    for rec in metrics.recovery:
        if fell_back and rec.get("interrupted"):
            assert rec["kind"] == "local" and "interrupted by another failure" in rec["reason"], rec
            continue
        assert (rec["kind"] == kind or (fell_back and rec["kind"] == "local")), rec
        assert rec["mode"] == rec["failure"].split(":")[1]
        for key in (*(field(p) for p in PHASES), "total_s", "replayed_microbatches", "bytes_transferred"):
            assert rec[key] >= 0, (key, rec)
        # the instants a timeline draws, in order and agreeing with the durations
        assert rec["open"] is False and not rec.get("interrupted"), rec
        instants = [rec[k] for k in INSTANTS]
        assert instants == sorted(instants), rec
        assert phases_from_instants(rec) == {field(p): rec[field(p)] for p in PHASES}
    base_dir, base_metrics = baselines(method)
    assert_bitwise_equal(base_dir, tmp_path)
    assert metrics.curves == base_metrics.curves
    events, _ = read_events(RunDir(tmp_path).event_files())
    assert any(e["kind"] == "RESTORE" for e in events)
    starts = read_lifecycle(RunDir(tmp_path).lifecycle)
    assert_one_truth([r for r in metrics.recovery if not r.get("interrupted")], [*starts, *events],
                     stages=metrics.config["train"]["stages"])
    # metrics.json's activity is the dashboard's live computation over the same events (the outage
    # included: every generation of a stage counts, the gap is idle)
    stages = metrics.config["train"]["stages"]
    activity = stage_stats(events, stages=stages)
    assert [p["active_fraction"] for p in metrics.per_stage] == [a.active_fraction for a in activity]
    assert metrics.bubble_fraction == bubble_fraction(activity, makespan_s(events))
    # every stage process, the replacements included, recorded its start-up phase by phase
    assert {(r["stage"], r["gen"]) for r in starts} >= {(s, 0) for s in range(stages)}
    assert len(starts) > stages  # and the replacements
    for r in starts:
        assert list(r["phases"]) == list(STARTUP_PHASES) and r["t0"] <= r["t1"]
    if kind == "local":  # only the failed stages restarted and replayed; nobody else rolled back
        failed = {int(f.split("@")[0]) for f in failures}
        assert {e["stage"] for e in events if e["kind"] in ("RESTORE", "REPLAY")} <= failed


def assert_one_truth(recoveries: list[dict], events: list[dict], *, stages: int) -> None:
    """Every duration of a recovery that the CLI, the dashboard's recovery line and the timeline (band,
    marker hover, RESTORE / REPLAY labels) show is the record's own number for that phase; the RESTORE bar
    of the failed stage's new process spans exactly the record's restore phase."""
    for rec in recoveries:
        words = {name: f"{name} {seconds_text(s)}" for name, s in phase_seconds(rec)}
        restore = next(e for e in events if e["kind"] == "RESTORE" and e["stage"] == rec["stage"]
                       and e["gen"] == rec["gen"])
        assert (restore["t0"], restore["t1"]) == (rec["t_restore_ns"], rec["t_restored_ns"])
        assert rec["total_s"] == sum(s for _, s in phase_seconds(rec))
        assert phases_text(rec) in recovery_text({"recoveries": [rec]})
        assert recovery_lines([rec]) == [f"recovered stage {rec['stage']} ({rec['mode']}, {rec['kind']}): "
                                         f"{phases_text(rec)}"]
        fig = timeline_figure(events, stages=stages, recoveries=[rec])
        notes = {a.name: a.text for a in fig.layout.annotations if a.name}
        assert words["detect"] in notes["failure-band-label"] and words["restart"] in notes["failure-band-label"]
        hover = next(t for t in fig.data if t.name == "failure").hovertext[0]
        assert all(w in hover for w in words.values()), (hover, words)
        labels = [a.text for a in fig.layout.annotations if a.name in ("RESTORE-label", "REPLAY-label")
                  and int(a.y) == rec["stage"]]
        assert f"RESTORE · {seconds_text(rec['restore_s'])}" in labels, labels
        # this record's REPLAY bars only: a second failure of the same stage replays in another process
        # (another generation) whose bars carry that record's numbers, not this one's
        origin = time_origin(events)
        starts_s = [to_s(e["t0"], origin) for e in events if e["kind"] == "REPLAY" and e["stage"] == rec["stage"]
                    and e["gen"] == rec["gen"]]  # a label sits at its run's first bar (rounded to the µs)
        replay = [a.text for a in fig.layout.annotations if a.name == "REPLAY-label" and int(a.y) == rec["stage"]
                  and any(abs(a.x - t) < 2e-6 for t in starts_s)]
        assert all(t.endswith(words["replay"]) for t in replay), (replay, words)


def _ids(cases):
    return ["-".join([m, *f]) for m, f in cases]


@pytest.mark.parametrize("method,failures", CI_CASES, ids=_ids(CI_CASES))
def test_recovered_run_equals_the_unfailed_run(tmp_path, baselines, method, failures):
    check_recovered(tmp_path, baselines, method, failures, run_to_the_end(cfg_for(tmp_path, method=method,
                                                                                  failures=failures)))


@pytest.mark.matrix
@pytest.mark.parametrize("method,failures", MATRIX_CASES, ids=_ids(MATRIX_CASES))
def test_fault_matrix_case_ends_bitwise_equal_or_is_refused(tmp_path, baselines, method, failures):
    if method == "pipedream":
        with pytest.raises(ConfigError, match="PipeDream cannot be recovered"):
            cfg_for(tmp_path, method=method, failures=failures)
        return
    check_recovered(tmp_path, baselines, method, failures, run_to_the_end(cfg_for(tmp_path, method=method,
                                                                                  failures=failures)))


def _until(run, condition, what: str) -> None:
    t0 = time.monotonic()
    while not condition(run.status()):
        assert not run.done, f"the run ended before {what}: {run.metrics and run.metrics.reason}"
        assert time.monotonic() - t0 < DEADLINE_S, f"waited {DEADLINE_S:g} s for {what}"
        time.sleep(0.02)


def test_a_failure_while_a_replacement_starts_restarts_it_again_and_ends_bitwise_equal(tmp_path, baselines):
    """Stage 1 dies; while its replacement starts, stage 0 dies too. The survivor (stage 2) was
    connecting to the first replacement: it must give that link up for the newer one (it once
    waited in the backend's connect until the replacement timed out)."""
    run = Run(cfg_for(tmp_path)).start()
    try:
        _until(run, lambda s: s.steps_done >= 2, "step 2")
        run.inject_failure(1, "kill")
        _until(run, lambda s: 1 in s.recovering and s.stage_states[1] in STARTUP_PHASES,
               "stage 1's replacement to start")
        run.inject_failure(0, "kill")
        metrics = run.wait(timeout=DEADLINE_S)
    finally:
        if not run.done:
            run.stop(timeout=30)
    assert metrics is not None and metrics.state == "finished", metrics and metrics.reason
    by_stage = {r["stage"]: r for r in metrics.recovery}
    assert sorted(by_stage) == [0, 1] and all(r["kind"] == "local" and not r["open"] for r in by_stage.values())
    assert "restarted again" in by_stage[1]["reason"]
    base_dir, base_metrics = baselines("zerolock")
    assert_bitwise_equal(base_dir, tmp_path)
    assert metrics.curves == base_metrics.curves
    events, _ = read_events(RunDir(tmp_path).event_files())
    assert {e["stage"] for e in events if e["kind"] == "RELINK"} >= {2}  # the survivor relinked


def test_a_stopped_stage_is_detected_and_never_comes_back(tmp_path):
    run = Run(cfg_for(tmp_path, steps=STEPS)).start()
    t0 = time.monotonic()
    while run.status().steps_done < 2:
        assert not run.done and time.monotonic() - t0 < DEADLINE_S
        time.sleep(0.05)
    victim = run._sup.procs[1]
    run.inject_failure(1, "stop")
    metrics = run.wait(timeout=DEADLINE_S)
    assert metrics.state == "finished"
    rec = metrics.recovery[0]
    assert rec["mode"] == "stop" and 0 < rec["detect_s"] < 10
    assert not victim.is_alive()  # killed after detection: continuing it is no longer possible
    with pytest.raises(ProcessLookupError):
        os.kill(victim.pid, signal.SIGCONT)


def test_fail_flag_validation():
    with pytest.raises(ConfigError, match="needs checkpoints"):
        cfg_for("/tmp/x", failures=["1@3"], ckpt_every=0)
    with pytest.raises(ConfigError, match="not STAGE@STEP"):
        cfg_for("/tmp/x", failures=["one@3"])
    with pytest.raises(ConfigError, match="mode must be one of"):
        cfg_for("/tmp/x", failures=["1@3:explode"])
    with pytest.raises(ConfigError, match="stage 5 is not in"):
        cfg_for("/tmp/x", failures=["5@3"])


@pytest.mark.parametrize("train,message", [
    ({"heartbeat_timeout_s": 0.1}, "must be at least 1 s"),
    ({"failures": ("1@5:mid-ckpt",), "steps": 6, "ckpt_every": 4}, "no checkpoint is written at or after step 5"),
    ({"failures": ("1@2", "1@3", "1@4"), "max_restarts": 2}, "3 failures into stage 1 but --max-restarts is 2"),
    ({"failures": ("1@2", "1@2:kill")}, "the same failure is given twice"),
    ({"failures": ("1@2:slow=1",)}, "a straggler's factor must be a finite number > 1"),
    ({"failures": ("1@2:kill=3",)}, "only slow takes =X"),
    ({"failures": ("1@2:slow", "1@2:slow=3")}, "the same failure is given twice"),
    ({"stage_speed": (1.0, 0.5)}, "--stage-speed has 2 values; give one, or one per stage"),
    ({"stage_speed": (0.0,)}, "--stage-speed"),
    ({"stall_timeout_s": 1.0}, "--stall-timeout"),
    ({"steps": 10**9}, "--steps 1000000000 is more than the engine runs, 1,000,000"),
])
def test_what_the_runtime_cannot_honour_is_refused_up_front(train, message):
    base = dict(runtime="pipeline", stages=3, steps=6, ckpt_every=2)
    with pytest.raises(ConfigError, match=message):
        RunConfig(train=TrainConfig(**{**base, **train}))


def test_pipedream_failures_are_refused_through_the_api_too(tmp_path):
    cfg = RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                    train=TrainConfig(runtime="pipeline", method="pipedream", stages=2, batch=4, microbatches=2,
                                      steps=2, ckpt_every=1), out=str(tmp_path))
    with pytest.raises(ValueError, match="PipeDream cannot be recovered"):
        Run(cfg).inject_failure(1, "kill")


def test_a_straggler_needs_no_checkpoints_and_counts_no_restart():
    RunConfig(train=TrainConfig(runtime="pipeline", stages=3, steps=6, ckpt_every=0, max_restarts=0,
                                method="pipedream", failures=("1@2:slow=3", "1@3:slow=2")))
