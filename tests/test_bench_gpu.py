"""`zerolock bench gpu`: the CPU dry run goes through every section end to end without the dashboard, gradio or
plotly importable (the device machine has none); a section past its timeout is recorded and the command goes
on; a section already written is skipped; `--device cuda` without CUDA is one line and exit 2."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.gpu.plan import SECTIONS, calibrated_budget, full_plan, tiny_plan
from benchmarks.common import paper

REPO = Path(__file__).resolve().parents[1]
UNIMPORTABLE = ("app", "gradio", "plotly", "kaleido")


def bench_gpu(tmp_path: Path, *args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """The command in a fresh interpreter (and so its sections and their stage processes) in which the dashboard,
    gradio and plotly cannot be imported: a sitecustomize marks them missing before anything runs."""
    blocker = tmp_path / "block"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(f"import sys\nsys.modules.update(dict.fromkeys({UNIMPORTABLE!r}))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(REPO)])}
    return subprocess.run([sys.executable, "-m", "zerolock_core", "bench", "gpu", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout_s)


def report(out: Path, section: str) -> dict:
    return json.loads((out / f"{section}.json").read_text())


@pytest.mark.slow
def test_the_cpu_dry_run_writes_every_section_ok_without_the_dashboard_or_plotly(tmp_path):
    out = tmp_path / "out"
    done = bench_gpu(tmp_path, "--device", "cpu", "--tiny", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    reports = {s: report(out, s) for s in SECTIONS}
    assert {s: (r["ok"], r["error"]) for s, r in reports.items()} == {s: (True, None) for s in SECTIONS}
    tests = reports["tests"]["result"]["tests"]
    assert tests and {t["outcome"] for t in tests} == {"skipped"}  # no CUDA here: collected, then skipped
    e1 = reports["e1"]["result"]["results"]
    assert list(e1) == list(tiny_plan().e1_methods)
    for r in e1.values():
        assert r["measured"]["samples_per_s"] > 0 and r["summary"]["max_activation_bytes"] > 0
    assert "in E1" in reports["envelope"]["result"]["config"]["budget_chosen"]
    assert [len(v) for v in reports["e2"]["result"]["runs"].values()] == [1]
    # run again: every section's JSON exists, so nothing runs
    again = bench_gpu(tmp_path, "--device", "cpu", "--tiny", "--out", str(out), timeout_s=120)
    assert again.returncode == 0 and again.stdout.count("exists (--force") == len(SECTIONS), again.stdout


def test_a_section_past_its_timeout_is_recorded_failed_and_the_command_exits_1(tmp_path):
    out = tmp_path / "out"
    done = bench_gpu(tmp_path, "--device", "cpu", "--tiny", "--only", "e1", "--timeout-scale", "0.001",
                     "--out", str(out), timeout_s=120)
    assert done.returncode == 1, done.stdout + done.stderr
    r = report(out, "e1")
    assert r["ok"] is False and r["error"].startswith("timed out")
    assert sorted(p.name for p in out.glob("*.json")) == ["e1.json"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_device_cuda_without_cuda_is_one_line_and_exit_2(tmp_path):
    done = bench_gpu(tmp_path, "--out", str(tmp_path / "out"), timeout_s=120)
    assert (done.returncode, done.stdout, len(done.stderr.splitlines())) == (2, "", 1), done.stderr
    assert "no CUDA" in done.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("args,message", [
    (["--only", "e3"], "e3 not in tests, e1, envelope, e2"),
    (["--skip", ""], "(none) not in"),
    (["--device", "tpu"], "invalid choice: 'tpu'"),
])
def test_bad_flags_are_refused_with_their_reason(capsys, args, message):
    from zerolock_core.cli import main

    with pytest.raises(SystemExit) as ended:  # argparse's refusal, before anything runs (in this process)
        main(["bench", "gpu", *args])
    assert ended.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("e1,budget,how", [
    (None, full_plan().envelope_fallback_budget, "fallback"),
    ({"result": {"results": {"zerolock": {}}}}, full_plan().envelope_fallback_budget, "fallback"),
    ({"result": {"results": {"gpipe": {"summary": {"max_activation_bytes": 800}}}}},
     800 * (paper.OOM_AT_BATCH["gpipe"] - 1) // full_plan().e1_batch, "scaled to b=9"),
])
def test_the_envelope_budget_is_gpipes_e1_peak_scaled_to_just_under_its_paper_oom(e1, budget, how):
    got, why = calibrated_budget(e1, full_plan())
    assert got == budget and how in why


def test_the_full_plan_fits_8_minutes_and_runs_the_paper_shapes():
    plan = full_plan()
    assert sum(plan.timeouts_s.values()) <= 8 * 60
    assert (plan.model, plan.stages, plan.e1_batch, plan.e1_microbatches, plan.e1_steps) == \
        ("tinyllama-shape", 3, 8, 4, 20)
    assert set(plan.e1_methods) >= {"zerolock", "gpipe", "1f1b", "pipedream"}
    assert (plan.envelope_microbatches, plan.e2_batch // plan.e2_microbatches) == (4, 1)
