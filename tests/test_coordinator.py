"""The coordinator's own failures end the run `failed` with every process gone; a crashed coordinator
leaves no orphans and its run resumes bitwise; a stopped run says what it is."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from zerolock_core.config import DataConfig, RunConfig, TrainConfig
from zerolock_core.runtime import run as run_module
from zerolock_core.runtime.processes import server_pid
from zerolock_core.runtime.run import Run
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
    assert metrics["state"] == "failed" and "disk full (injected)" in metrics["reason"]
    assert json.loads((tmp_path / "metrics.json").read_text())["state"] == "failed"
    assert_no_process_left(before)


def test_an_exception_in_the_coordinator_loop_kills_every_stage_within_seconds(tmp_path, monkeypatch):
    calls = []

    def broken(self):
        calls.append(1)
        if len(calls) > 20:  # about a second in: the stages are loading or training
            raise RuntimeError("bug in the coordinator (injected)")
    monkeypatch.setattr(Run, "_close_recoveries", broken)
    before = {p.pid for p in children_of_this_process()}
    t0 = time.monotonic()
    metrics = wait_done(Run(cfg_for(tmp_path, steps=50)).start())
    assert metrics["state"] == "failed" and "bug in the coordinator (injected)" in metrics["reason"]
    assert "coordinator" in metrics["errors"]
    assert time.monotonic() - t0 < DEADLINE_S
    assert_no_process_left(before)


def test_a_spawn_failure_halfway_through_start_ends_failed_with_no_process_left(tmp_path, monkeypatch):
    real = Run._spawn
    spawned = []

    def spawn_once(self, launch):
        if spawned:
            raise OSError("fork failed (injected)")
        spawned.append(launch.stage)
        return real(self, launch)
    monkeypatch.setattr(Run, "_spawn", spawn_once)
    before = {p.pid for p in children_of_this_process()}
    run = Run(cfg_for(tmp_path)).start()
    assert run.done and run.metrics["state"] == "failed" and "fork failed (injected)" in run.metrics["reason"]
    assert json.loads((tmp_path / "metrics.json").read_text())["state"] == "failed"
    assert_no_process_left(before)


def test_a_stage_crashing_while_it_starts_ends_the_run_failed_not_respawned(tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "stage_main", _exits_at_once)
    metrics = wait_done(Run(cfg_for(tmp_path)).start())
    assert metrics["state"] == "failed" and "before it started training" in metrics["reason"]
    assert metrics["restarts"] == [0, 0]


def _exits_at_once(cfg_dict, launch):
    sys.exit(7)


def test_a_stop_request_ends_stopped_says_which_steps_final_holds_and_exits_130(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "zerolock_core", *train_args(tmp_path, 400)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_checkpoints(tmp_path, stages=2, step=2, proc=proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["state"] == "stopped" and len(metrics["final_steps"]) == 2
    assert "run stopped after" in out and "--resume" in out
    if len(set(metrics["final_steps"])) > 1:
        assert metrics["eval"] is None and "mixes them" in metrics["eval_skipped"]


def _wait_for_checkpoints(d: Path, *, stages: int, step: int, proc):
    t0 = time.monotonic()
    while not all((d / "checkpoints" / f"stage{s}" / f"step{step:08d}" / "MANIFEST.json").exists()
                  for s in range(stages)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < DEADLINE_S, "no checkpoints in time"
        time.sleep(0.1)


def test_after_the_coordinator_is_killed_the_stages_exit_and_resume_ends_bitwise_equal(tmp_path):
    from zerolock_core.cli import main
    from zerolock_core.runtime.launch import train_pipeline

    base = tmp_path / "base"
    train_pipeline(cfg_for(base, steps=8), progress=False)
    d = tmp_path / "crashed"
    proc = subprocess.Popen([sys.executable, "-m", "zerolock_core", *train_args(d, 8)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_checkpoints(d, stages=2, step=2, proc=proc)
        stages = [c for c in psutil.Process(proc.pid).children(recursive=True)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
    _, alive = psutil.wait_procs(stages, timeout=15)  # the heartbeat thread notices the store is gone
    assert not alive, "stage processes outlived their coordinator"
    assert main(["train", "--resume", str(d), "--quiet"]) == 0
    metrics = json.loads((d / "metrics.json").read_text())
    assert metrics["state"] == "finished" and metrics["resumed_from_step"] >= 2
    assert_bitwise_equal(base, d)
    assert main(["train", "--resume", str(d), "--quiet"]) == 2  # a finished run is refused


def test_a_pipeline_that_stops_making_progress_ends_failed(tmp_path, monkeypatch):
    """A stall the heartbeats cannot see (every thread alive, no action runs): the stall timeout ends it."""
    monkeypatch.setattr(run_module, "stage_main", _hangs_after_running)
    metrics = wait_done(Run(cfg_for(tmp_path, stall_timeout_s=5.0)).start())
    assert metrics["state"] == "failed" and "the pipeline stalled" in metrics["reason"]


def _hangs_after_running(cfg_dict, launch):
    import torch.distributed as dist

    from zerolock_core.runtime import protocol
    from zerolock_core.runtime.heartbeat import Heartbeat

    store = dist.TCPStore(launch.host, launch.port, is_master=False)
    Heartbeat(launch.host, launch.port, launch.stage, launch.generation)
    store.set(protocol.stage_state(launch.stage), "running")
    time.sleep(600)
