"""torchrun for real: two "nodes" on one machine over 127.0.0.1, one rank (stage) each.

Final weights equal the local launcher's bit for bit, with and without checkpoints; a killed rank
ends the job within seconds with a clear reason; with --max-restarts torchrun starts the job again
and it resumes from the checkpoints, bitwise equal to the unfailed run. K=4 is the matrix tier.
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from zerolock_core.cli import main
from test_fault_tolerance import assert_bitwise_equal
from benchmarks.common.machine import free_port

pytestmark = pytest.mark.slow

DEADLINE_S = 400


def train_flags(out: Path, *, method: str, stages: int, ckpt_every: int, extra=()) -> list[str]:
    return ["train", "--runtime", "pipeline", "--method", method, "--stages", str(stages), "--batch", "4",
            "--microbatches", "4", "--steps", "4", "--seq-len", "32", "--eval-size", "8", "--threads", "1",
            "--ckpt-every", str(ckpt_every), "--heartbeat-timeout", "2", "--out", str(out), "--quiet",
            "--no-final-eval", *extra]


def torchrun_two_nodes(flags: list[str], *, stages: int, logs: Path,
                       max_restarts: int = 0) -> list[subprocess.CompletedProcess]:
    """Node 0 runs the first half of the stages, node 1 the rest; both on 127.0.0.1. Their output
    goes to files (a pipe nobody drains would block a chatty node), and each node is its own
    process group, ended whole at the end whatever happened."""
    port = free_port(block=2)  # the job's own store listens on port + 1
    per_node = stages // 2
    procs, files = [], []
    for r in (0, 1):
        out, err = open(logs / f"node{r}.out", "w+"), open(logs / f"node{r}.err", "w+")
        files.append((out, err))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(r),
             "--nproc-per-node", str(per_node), "--master-addr", "127.0.0.1", "--master-port", str(port),
             "--max-restarts", str(max_restarts), "--monitor-interval", "0.5", "-m", "zerolock_core", *flags],
            stdout=out, stderr=err, text=True, start_new_session=True))
    results = []
    try:
        for p in procs:
            p.wait(timeout=DEADLINE_S)
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    for p, (out, err) in zip(procs, files):
        out.seek(0)
        err.seek(0)
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out.read(), err.read()))
        out.close()
        err.close()
    return results


@pytest.fixture(scope="module")
def local_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    cache = {}

    def get(method, stages, ckpt_every):
        key = (method, stages, ckpt_every)
        if key not in cache:
            d = root / "-".join(map(str, key))
            assert main(train_flags(d, method=method, stages=stages, ckpt_every=ckpt_every)) == 0
            cache[key] = d
        return cache[key]
    return get


CASES = [("zerolock", 2, 2), ("1f1b", 2, 0)]
MATRIX = [("zerolock", 2, 0), ("1f1b", 2, 2), ("zerolock", 4, 2), ("1f1b", 4, 0)]


def _check_equal(tmp_path, local_runs, method, stages, ckpt_every):
    d = tmp_path / "torchrun"
    results = torchrun_two_nodes(train_flags(d, method=method, stages=stages, ckpt_every=ckpt_every), stages=stages,
                                 logs=tmp_path)
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-2000:] for r in results]
    assert json.loads((d / "metrics.json").read_text())["state"] == "finished"
    assert_bitwise_equal(local_runs(method, stages, ckpt_every), d)


@pytest.mark.parametrize("method,stages,ckpt_every", CASES)
def test_two_torchrun_nodes_equal_the_local_launcher_bitwise(tmp_path, local_runs, method, stages, ckpt_every):
    _check_equal(tmp_path, local_runs, method, stages, ckpt_every)


@pytest.mark.matrix
@pytest.mark.parametrize("method,stages,ckpt_every", MATRIX)
def test_torchrun_matrix_equals_the_local_launcher_bitwise(tmp_path, local_runs, method, stages, ckpt_every):
    _check_equal(tmp_path, local_runs, method, stages, ckpt_every)


def test_a_killed_rank_ends_the_torchrun_job_with_a_clear_reason(tmp_path):
    d = tmp_path / "killed"
    results = torchrun_two_nodes(train_flags(d, method="zerolock", stages=2, ckpt_every=2, extra=["--fail", "1@2"]),
                                 stages=2, logs=tmp_path)
    assert all(r.returncode != 0 for r in results)
    metrics = json.loads((d / "metrics.json").read_text())
    assert metrics["state"] == "failed" and "stage 1" in metrics["reason"], metrics["reason"]
    assert "pipeline run failed" in results[0].stderr


def test_a_restarted_torchrun_job_resumes_from_its_checkpoints_bitwise(tmp_path, local_runs):
    d = tmp_path / "restarted"
    results = torchrun_two_nodes(train_flags(d, method="zerolock", stages=2, ckpt_every=2, extra=["--fail", "1@3"]),
                                 stages=2, max_restarts=1, logs=tmp_path)
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-2000:] for r in results]
    metrics = json.loads((d / "metrics.json").read_text())
    assert metrics["state"] == "finished" and metrics["resumed_from_step"] == 2
    assert (d / "injected").is_dir()  # the failure fired once, and not again after the restart
    assert_bitwise_equal(local_runs("zerolock", 2, 2), d)


def test_auto_boundaries_measured_by_rank_0_reach_every_rank_and_survive_a_restart(tmp_path):
    """Rank 0 measures once and hands the boundaries to the other ranks; the restarted session keeps them
    (its checkpoints are of those chunks). Bitwise equal to the local launcher given the same boundaries by
    name (a rank that built other chunks would not be)."""
    d = tmp_path / "auto"
    extra = ["--boundaries", "auto", "--stage-speed", "1,0.5", "--fail", "1@3"]
    results = torchrun_two_nodes(train_flags(d, method="zerolock", stages=2, ckpt_every=2, extra=extra),
                                 stages=2, max_restarts=1, logs=tmp_path)
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-2000:] for r in results]
    metrics, balance = (json.loads((d / name).read_text()) for name in ("metrics.json", "balance.json"))
    assert metrics["state"] == "finished" and metrics["resumed_from_step"] == 2
    assert metrics["layers"] == balance["layers"]
    named = ",".join(map(str, balance["boundaries"]))
    local = tmp_path / "local"
    assert main(train_flags(local, method="zerolock", stages=2, ckpt_every=2,
                            extra=["--boundaries", named, "--stage-speed", "1,0.5"])) == 0
    assert_bitwise_equal(local, d)
