"""Failures on real processes: a recovered run ends bitwise equal to the same run without failure."""
import json
import os
import signal
import time

import pytest
import torch

from zerolock_core.artifacts import load_final_weights
from zerolock_core.config import ConfigError, DataConfig, RunConfig, TrainConfig
from zerolock_core.runtime.launch import train_pipeline
from zerolock_core.runtime.run import Run

pytestmark = pytest.mark.slow

STEPS = 6


def cfg_for(out, *, method="zerolock", failures=(), stages=3, ckpt_every=2, steps=STEPS):
    return RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                     train=TrainConfig(runtime="pipeline", method=method, stages=stages, batch=4, microbatches=4,
                                       steps=steps, threads=1, ckpt_every=ckpt_every, failures=tuple(failures),
                                       heartbeat_timeout_s=2.0),
                     out=str(out))


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    root = tmp_path_factory.mktemp("baseline")
    return {method: (root / method, train_pipeline(cfg_for(root / method, method=method), progress=False))
            for method in ("zerolock", "1f1b")}


def assert_bitwise_equal(a_dir, b_dir):
    a, b = load_final_weights(a_dir), load_final_weights(b_dir)
    assert sorted(a) == sorted(b)
    for k in a:
        for name in a[k]:
            assert torch.equal(a[k][name], b[k][name]), (k, name)


@pytest.mark.parametrize("method,failures,kind", [
    ("zerolock", ["1@3:kill"], "local"),
    ("zerolock", ["1@3:stop"], "local"),
    ("zerolock", ["1@3:post-step"], "local"),
    ("zerolock", ["2@3:mid-ckpt"], "local"),
    ("zerolock", ["0@2:kill", "2@4:kill"], "local"),
    ("1f1b", ["1@3:kill"], "global"),
    ("1f1b", ["2@3:post-step"], "global"),
])
def test_recovered_run_equals_the_unfailed_run(tmp_path, baselines, method, failures, kind):
    m = train_pipeline(cfg_for(tmp_path, method=method, failures=failures), progress=False)
    assert m["state"] == "finished" and m["steps_done"] == STEPS
    assert len(m["recovery"]) == len(failures)
    for rec, spec in zip(m["recovery"], failures):
        assert rec["kind"] == kind and rec["mode"] == spec.split(":")[1]
        for key in ("detect_s", "restore_s", "replay_s", "total_s", "replayed_microbatches", "bytes_transferred"):
            assert rec[key] >= 0
    assert_bitwise_equal(baselines[method][0], tmp_path)
    assert m["train"]["curves"] == baselines[method][1]["train"]["curves"]
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "RESTORE" for e in events)
    if kind == "local":  # only the failed stage restarted and replayed; nobody else rolled back
        failed = {int(f.split("@")[0]) for f in failures}
        assert {e["stage"] for e in events if e["kind"] in ("RESTORE", "REPLAY")} <= failed


def test_a_stopped_stage_is_detected_and_never_comes_back(tmp_path):
    run = Run(cfg_for(tmp_path, steps=STEPS)).start()
    while run.status()["steps_done"] < 2:
        assert not run.done
        time.sleep(0.05)
    victim = run._procs[1]
    run.inject_failure(1, "stop")
    metrics = run.wait(timeout=300)
    assert metrics["state"] == "finished"
    rec = metrics["recovery"][0]
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
