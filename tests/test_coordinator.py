"""The coordinator's own failures end the run `failed` with every process gone; a crashed coordinator
leaves no orphans and its run resumes bitwise; a stopped run says what it is."""
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.cli import main
from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
from zerolock_core.jobs import pipeline_job as run_module
from zerolock_core.runtime.processes import server_pid
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.runtime.checkpoint import CheckpointStore
from zerolock_core.jobs.pipeline_job import Run
from zerolock_core.runtime.supervisor import StageSupervisor
from test_fault_tolerance import assert_bitwise_equal

pytestmark = pytest.mark.slow

DEADLINE_S = 300


def cfg_for(out, *, steps=4, ckpt_every=2, stages=2, **train):
    return RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                     train=TrainConfig(runtime="pipeline", stages=stages, batch=4, microbatches=2, steps=steps,
                                       threads=1, ckpt_every=ckpt_every, heartbeat_timeout_s=2.0, final_eval=False,
                                       **train),
                     out=str(out))


def train_args(out, steps):
    return ["train", "--runtime", "pipeline", "--method", "zerolock", "--stages", "2", "--batch", "4",
            "--microbatches", "2", "--steps", str(steps), "--seq-len", "32", "--eval-size", "8", "--threads", "1",
            "--ckpt-every", "2", "--heartbeat-timeout", "2", "--out", str(out), "--quiet", "--no-final-eval"]


def children_of_this_process():
    """Our child processes, less multiprocessing's resource tracker and the engine's process server
    (they live as long as we do)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.is_running() and p.pid != server_pid() and "resource_tracker" not in " ".join(p.cmdline()):
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def assert_no_process_left(before=()):
    _, alive = psutil.wait_procs([p for p in children_of_this_process() if p.pid not in before], timeout=15)
    assert not alive, [p.cmdline()[:3] for p in alive]


def wait_done(run):
    metrics = run.wait(timeout=DEADLINE_S)
    assert run.done, f"the run did not end within {DEADLINE_S} s"
    return metrics


def test_an_exception_in_the_coordinator_ends_the_run_failed_with_valid_metrics(tmp_path, monkeypatch):
    def broken_trace(*args, **kwargs):
        raise OSError("disk full (injected)")
    monkeypatch.setattr(run_module, "write_trace", broken_trace)
    before = {p.pid for p in children_of_this_process()}
    metrics = wait_done(Run(cfg_for(tmp_path, steps=2)).start())
    assert metrics.state == "failed" and "disk full (injected)" in metrics.reason
    assert json.loads((tmp_path / "metrics.json").read_text())["state"] == "failed"
    assert_no_process_left(before)


def test_an_exception_in_the_coordinator_loop_kills_every_stage_within_seconds(tmp_path, monkeypatch):
    calls = []
    real = StageSupervisor.failed_stages

    def broken(self, *args, **kwargs):
        calls.append(1)
        if len(calls) > 20:  # about a second in: the stages are loading or training
            raise RuntimeError("bug in the coordinator (injected)")
        return real(self, *args, **kwargs)
    monkeypatch.setattr(StageSupervisor, "failed_stages", broken)
    before = {p.pid for p in children_of_this_process()}
    metrics = wait_done(Run(cfg_for(tmp_path, steps=50)).start())
    assert metrics.state == "failed" and "bug in the coordinator (injected)" in metrics.reason
    assert "coordinator" in metrics.errors
    assert_no_process_left(before)


def test_a_spawn_failure_halfway_through_start_ends_failed_with_no_process_left(tmp_path, monkeypatch):
    real = StageSupervisor.spawn
    spawned = []

    def spawn_once(self, launch):
        if spawned:
            raise OSError("fork failed (injected)")
        spawned.append(launch.stage)
        return real(self, launch)
    monkeypatch.setattr(StageSupervisor, "spawn", spawn_once)
    before = {p.pid for p in children_of_this_process()}
    run = Run(cfg_for(tmp_path)).start()
    assert run.done and run.metrics.state == "failed" and "fork failed (injected)" in run.metrics.reason
    assert json.loads((tmp_path / "metrics.json").read_text())["state"] == "failed"
    assert not RunDir(tmp_path).is_live()
    assert_no_process_left(before)


def test_a_stage_crashing_while_it_starts_ends_the_run_failed_not_respawned(tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "stage_main", _exits_at_once)
    metrics = wait_done(Run(cfg_for(tmp_path)).start())
    assert metrics.state == "failed" and "before it started training" in metrics.reason
    assert metrics.restarts == [0, 0]


def _exits_at_once(cfg_dict, launch):
    sys.exit(7)


# ---- a stop at any moment: Ctrl-C and SIGTERM are never lost -------------------------------------
STOP_STEPS = 120
# (case, the moment it waits for, the signals sent then, a final eval?); the mid-training cases wait a
# seeded random extra time after the step-2 checkpoints, so each stops a different moment of the run
STOP_CASES = [
    ("sigint-while-the-stages-start", "started", (signal.SIGINT,), False),
    ("sigint-mid-training-0", "checkpoint+0", (signal.SIGINT,), False),
    ("two-sigints-mid-training-1", "checkpoint+1", (signal.SIGINT, signal.SIGINT), False),
    ("sigterm-mid-training-2", "checkpoint+2", (signal.SIGTERM,), False),
    ("sigint-during-the-final-eval", "eval", (signal.SIGINT,), True),
]


def _wait_for(moment: str, d: Path, proc) -> None:
    rd, t0 = RunDir(d), time.monotonic()

    def reached() -> bool:
        if moment == "started":
            return rd.config_json.exists()
        if moment == "eval":
            return rd.eval_progress.exists()
        return all(2 in CheckpointStore(rd, stage=s).verified_steps() for s in range(2))
    while not reached():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < DEADLINE_S, f"the run never reached {moment}"
        time.sleep(0.02)
    if "+" in moment:
        time.sleep(random.Random(int(moment.split("+")[1])).uniform(0.0, 1.0))


@pytest.fixture(scope="module")
def unfailed_run(tmp_path_factory):
    """The same run with no stop: what a stopped-and-resumed one must equal bit for bit."""
    from zerolock_core.jobs.job import train

    d = tmp_path_factory.mktemp("unfailed") / "run"
    train(cfg_for(d, steps=STOP_STEPS), progress=False)
    return d


@pytest.mark.parametrize("case,moment,signals,final_eval", STOP_CASES, ids=[c[0] for c in STOP_CASES])
def test_a_stop_at_any_moment_ends_stopped_with_a_true_record_no_process_and_exit_130(
        tmp_path, capsys, unfailed_run, case, moment, signals, final_eval):
    args = train_args(tmp_path, STOP_STEPS)
    if final_eval:  # a short run with 256 eval examples: the stop lands while the eval loads or scores
        args = [a for a in args if a != "--no-final-eval"] + ["--eval-size", "256", "--steps", "10"]
    proc = subprocess.Popen([sys.executable, "-m", "zerolock_core", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(moment, tmp_path, proc)
        if moment.startswith("checkpoint"):  # a live run refuses a second writer, whatever it asks
            for second in (["train", "--resume", str(tmp_path), "--quiet"], [*args, "--overwrite"], args):
                assert main(second) == 2
                assert "is in use: process" in capsys.readouterr().err
            assert not RunDir(tmp_path).metrics.exists()  # the live run's record is its own to write
        family = psutil.Process(proc.pid).children(recursive=True)
        for sig in signals:
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "stopping: every stage finishes its current action" in err
    _, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, [p.cmdline()[:3] for p in alive]
    rd = RunDir(tmp_path)
    metrics = rd.read_metrics()
    assert metrics.state == "stopped" and metrics.reason == "stopped on request"
    assert metrics.steps_done < STOP_STEPS or final_eval
    assert "run stopped after" in out and "--resume" in out
    assert not rd.is_live() and not list(tmp_path.rglob(".*.tmp-*"))
    if final_eval:  # every step trained: only the eval was skipped, and --resume runs just that
        assert metrics.training_complete and metrics.eval is None and "--resume" in metrics.eval_skipped
        trained = load_final_weights(tmp_path)
        assert main(["train", "--resume", str(tmp_path), "--quiet"]) == 0
        resumed = rd.read_metrics()
        assert resumed.state == "finished" and resumed.eval["examples"] > 0
        # the record said where --resume continues: every step trained (only the eval left), then nothing
        assert (metrics.resumable_from_step, resumed.resumable_from_step) == (metrics.total_steps, None)
        assert resumed.per_stage == metrics.per_stage  # the training record is kept
        after = load_final_weights(tmp_path)  # and the weights were not touched
        assert all(torch.equal(trained[k][n], after[k][n]) for k in trained for n in trained[k]) and trained
    elif moment.startswith("checkpoint"):
        assert metrics.resumable_from_step is not None and metrics.resumable_from_step >= 2
        assert len(metrics.final_steps) == 2
        if case.endswith("-0"):  # resumed from its checkpoints, it ends as if never stopped
            assert main(["train", "--resume", str(tmp_path), "--quiet"]) == 0
            assert rd.read_metrics().state == "finished"
            assert_bitwise_equal(unfailed_run, tmp_path)


def test_a_stop_during_a_recovery_records_it_and_says_where_resume_continues(tmp_path):
    run = Run(cfg_for(tmp_path, steps=STOP_STEPS, warm_standby="off")).start()
    try:
        t0 = time.monotonic()
        while run.status().steps_done < 4:
            assert not run.done and time.monotonic() - t0 < DEADLINE_S
            time.sleep(0.05)
        run.inject_failure(1, "kill")
        while 1 not in run.status().recovering:
            assert not run.done and time.monotonic() - t0 < DEADLINE_S
            time.sleep(0.02)
        metrics = run.stop(timeout=DEADLINE_S)
    finally:
        if not run.done:
            run.stop(timeout=60)
    assert metrics.state == "stopped" and metrics.steps_done >= 2
    assert len(metrics.recovery) == 1 and "stopped during the recovery" in metrics.recovery[0]["reason"]
    assert metrics.resumable_from_step is not None and metrics.resumable_from_step >= 2
    assert all(not p.is_alive() for p in run._sup.procs)


def test_after_the_coordinator_is_killed_the_stages_exit_and_resume_ends_bitwise_equal(tmp_path):
    from zerolock_core.jobs.job import train

    base = tmp_path / "base"
    train(cfg_for(base, steps=8), progress=False)
    d = tmp_path / "crashed"
    proc = subprocess.Popen([sys.executable, "-m", "zerolock_core", *train_args(d, 8)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for("checkpoint", d, proc)
        stages = [c for c in psutil.Process(proc.pid).children(recursive=True)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        _, alive = psutil.wait_procs(stages, timeout=15)  # they go with the process server, or notice the store
        err = proc.stderr.read()  # every writer of the pipe has gone
    finally:
        proc.kill()
    assert not alive, "stage processes outlived their coordinator"
    assert "frame #" not in err and len(err.splitlines()) <= 2 * len(stages), err[-3000:]
    assert main(["train", "--resume", str(d), "--quiet"]) == 0
    metrics = json.loads((d / "metrics.json").read_text())
    assert metrics["state"] == "finished" and metrics["resumed_from_step"] >= 2
    assert_bitwise_equal(base, d)
    assert main(["train", "--resume", str(d), "--quiet"]) == 2  # a finished run is refused


def test_a_pipeline_that_stops_making_progress_ends_failed(tmp_path, monkeypatch):
    """A stall the heartbeats cannot see (every thread alive, no action runs): the stall timeout ends it."""
    monkeypatch.setattr(run_module, "stage_main", _hangs_after_running)
    metrics = wait_done(Run(cfg_for(tmp_path, stall_timeout_s=5.0)).start())
    assert metrics.state == "failed" and "the pipeline stalled" in metrics.reason


def _hangs_after_running(cfg_dict, launch):
    import torch.distributed as dist

    from zerolock_core.runtime import protocol
    from zerolock_core.runtime.heartbeat import Heartbeat

    store = dist.TCPStore(launch.host, launch.port, is_master=False)
    Heartbeat(launch.host, launch.port, launch.stage, launch.generation)
    store.set(protocol.stage_state(launch.stage), "running")
    time.sleep(600)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_before_the_run_starts_creates_nothing_and_exits_130(tmp_path, capsys, monkeypatch, sig):
    """Ctrl-C or SIGTERM during `zerolock train`'s imports and checks (seconds on a busy machine): recorded
    like any other, the run is not started, nothing is created."""
    from zerolock_core import cli

    real = cli.preflight

    def preflight_interrupted(cfg):
        real(cfg)
        # to this thread, not the process: a process-directed signal may be taken by another thread a
        # test left running and, on a busy machine, handled after the checks returned (a race of the test)
        signal.raise_signal(sig)  # arrives while the checks run, before any run exists
    monkeypatch.setattr(cli, "preflight", preflight_interrupted)
    out = tmp_path / "run"
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when the suite runs in the background (`cmd &`)
    assert main(train_args(out, 10)) == 130
    assert "stopped before the run started: nothing was created" in capsys.readouterr().err
    assert not out.exists()
    assert signal.getsignal(signal.SIGINT) is before  # the CLI's handlers are gone again


def _sleep_briefly() -> None:
    time.sleep(30)


@pytest.mark.parametrize("case, sent", [("running", True), ("exited and reaped", False),
                                        ("gone between the check and the signal", False)])
def test_signalling_a_stage_says_whether_it_reached_a_process_and_never_raises(case, sent, monkeypatch):
    """The race a busy CI machine hit: a stage exits, and another thread's is_alive reaps it, between
    the supervisor's check and its os.kill; the coordinator must not fail with ProcessLookupError."""
    import multiprocessing

    from zerolock_core.runtime import supervisor
    p = multiprocessing.get_context("fork").Process(target=_sleep_briefly if case != "exited and reaped" else int)
    p.start()
    try:
        if case == "exited and reaped":
            p.join(10)
        if case == "gone between the check and the signal":
            def vanished(pid, sig):
                raise ProcessLookupError(3, "No such process")
            monkeypatch.setattr(supervisor.os, "kill", vanished)
        assert supervisor._signal(p, signal.SIGCONT) is sent
    finally:
        monkeypatch.undo()
        if p.is_alive():
            p.kill()
        p.join(10)
