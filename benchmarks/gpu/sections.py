"""One section of `zerolock bench gpu`, run in a process of its own (`python -m benchmarks.gpu.sections NAME`)
so that the command can stop it at its timeout and go on: it writes OUT/NAME.json (atomically) as it ends —
`ok`, the error if any, its wall time and its result. Nothing here imports the dashboard or plots: the
device machine may have neither gradio nor plotly.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from zerolock_core.rundir.atomic_files import read_json, read_json_lines, write_json_atomic
from ..common import paper
from .plan import SECTIONS, GpuPlan, calibrated_budget, full_plan, tiny_plan
from .test_log import LOG_ENV, append_line, outcome_line
from ..common.machine import machine_line
from ..common.presets import resolve_bench_model
from ..common.settings import BenchSettings, report_header

REPO = Path(__file__).resolve().parents[2]
GPU_TESTS = "tests/test_gpu.py"


def progress_path(out: Path, name: str) -> Path:
    """What a section has finished so far, one JSON line each (the tests section: every test's outcome)."""
    return out / f"{name}.progress.jsonl"


def settings_for(plan: GpuPlan, device: str, *, steps: int) -> BenchSettings:
    return BenchSettings(model=plan.model, seq_len=plan.seq_len, steps=steps, device=device)


# ---- the sections: each returns (ok, result) -------------------------------------------------------------

def run_tests(plan: GpuPlan, *, out: Path, work: Path, device: str, budget: int | None) -> tuple[bool, dict]:
    """tests/test_gpu.py under pytest -m gpu (every outcome logged as it ends); where pytest is missing, the
    same checks called directly. On CPU they are skipped: the dry run checks this path, not the checks."""
    log = progress_path(out, "tests")
    log.unlink(missing_ok=True)
    env = {LOG_ENV: str(log)}
    if importlib.util.find_spec("pytest") is not None:
        cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "benchmarks.gpu.test_log",
               "-p", "no:cacheprovider", f"--basetemp={work / 'tests'}", GPU_TESTS]
        done = subprocess.run(cmd, cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True)
        runner, rc, tail = "pytest", done.returncode, (done.stdout + done.stderr)[-4000:]
    else:
        runner, rc, tail = "direct (pytest is not installed)", None, ""
        run_checks_directly(work / "tests", log_to=log)
    outcomes = read_json_lines(log)
    bad = [o["test"] for o in outcomes if o["outcome"] not in ("passed", "skipped")]
    # on the GPU every check must run: a skip there means CUDA was not seen
    skipped_on_gpu = device == "cuda" and any(o["outcome"] == "skipped" for o in outcomes)
    ok = bool(outcomes) and not bad and not skipped_on_gpu and rc in (0, None)
    return ok, {"runner": runner, "returncode": rc, "tests": outcomes, "failed": bad, "output_tail": tail}


def run_checks_directly(root: Path, *, log_to: Path) -> None:
    from .checks import CHECKS, CheckRuns, CheckShape, check_device

    os.environ[LOG_ENV] = str(log_to)
    device = check_device()
    runs = CheckRuns(root=root, shape=CheckShape(device=device or "cpu"))
    for name, check in CHECKS.items():
        t0 = time.perf_counter()
        if device is None:
            append_line(outcome_line(test=name, outcome="skipped", duration_s=0.0, properties={},
                                     error="needs CUDA"))
            continue
        try:
            props, outcome, error = check(runs), "passed", None
        except Exception:  # a failing check is recorded; the next one runs
            props, outcome, error = {}, "failed", traceback.format_exc()
        append_line(outcome_line(test=name, outcome=outcome, duration_s=time.perf_counter() - t0,
                                 properties=props, error=error))


def run_e1(plan: GpuPlan, *, out: Path, work: Path, device: str, budget: int | None) -> tuple[bool, dict]:
    """`zerolock bench memory`'s per-stage breakdown (CUDA peaks included) and the paper's reductions beside,
    with `zerolock bench throughput`'s measurement (after the first window, bubble) of the same runs."""
    from ..common.measure import measured
    from ..memory import run_memory
    from ..common.pipeline_runs import PipelineRuns

    t0 = time.perf_counter()
    resolve_bench_model(plan.model)  # tinyllama-shape: built once (random weights), here and timed
    model_s = time.perf_counter() - t0
    settings = settings_for(plan, device, steps=plan.e1_steps)
    runs = PipelineRuns(work / "e1", verbose=False)
    geometry = dict(stages=plan.stages, batch=plan.e1_batch, microbatches=plan.e1_microbatches)
    report = run_memory(settings, runs=runs, out=work / "e1", methods=plan.e1_methods, **geometry)
    for method, r in report["results"].items():
        o = runs.run(settings.pipeline(method=method, **geometry, out=runs.root))  # the cached run
        r["measured"] = measured(o, batch=plan.e1_batch, microbatches=plan.e1_microbatches, steps=plan.e1_steps)
    report["paper_throughput_vs"] = paper.THROUGHPUT_VS
    report["model_ready_s"] = model_s
    return True, report


def run_envelope_section(plan: GpuPlan, *, out: Path, work: Path, device: str,
                         budget: int | None) -> tuple[bool, dict]:
    from ..envelope import run_envelope
    from ..common.pipeline_runs import PipelineRuns

    how = "--memory-budget"
    if budget is None:
        budget, how = calibrated_budget(read_json(out / "e1.json"), plan)
    report = run_envelope(settings_for(plan, device, steps=plan.envelope_steps),
                          runs=PipelineRuns(work / "envelope", verbose=False), stages=plan.stages,
                          microbatches=plan.envelope_microbatches, budget_bytes=budget,
                          max_batch=plan.envelope_max_batch, methods=plan.envelope_methods)
    report["config"]["budget_chosen"] = how
    return True, report


def run_e2(plan: GpuPlan, *, out: Path, work: Path, device: str, budget: int | None) -> tuple[bool, dict]:
    from ..recovery import run_recovery

    report = run_recovery(settings_for(plan, device, steps=plan.e2_steps), out=work / "e2", stages=plan.stages,
                          batch=plan.e2_batch, microbatches=plan.e2_microbatches, fail_stage=1,
                          fail_step=plan.e2_fail_step, ckpt_every=plan.e2_ckpt_every, mode="kill", repeats=1,
                          variants=plan.e2_variants)
    return True, report


RUNNERS: dict[str, Callable[..., tuple[bool, dict]]] = {
    "tests": run_tests, "e1": run_e1, "envelope": run_envelope_section, "e2": run_e2}
assert tuple(RUNNERS) == SECTIONS


def run_section(name: str, *, out: Path, work: Path, device: str, tiny: bool, budget: int | None) -> bool:
    """Run one section and write OUT/NAME.json; whether it succeeded."""
    plan = tiny_plan() if tiny else full_plan()
    t0 = time.perf_counter()
    try:
        ok, result = RUNNERS[name](plan, out=out, work=work, device=device, budget=budget)
        error = None if ok else "see result"
    except Exception:  # the section's failure is its result; the command goes on to the next section
        ok, result, error = False, None, traceback.format_exc()
    write_json_atomic(out / f"{name}.json", {
        **report_header(f"gpu {name}", None), "machine": machine_line(device), "section": name, "device": device, "tiny": tiny, "ok": ok,
        "error": error, "wall_s": time.perf_counter() - t0, "timeout_s": plan.timeouts_s[name], "result": result})
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu.sections")
    p.add_argument("section", choices=SECTIONS)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--device", required=True)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--budget", type=int, default=None)
    a = p.parse_args(argv)
    return 0 if run_section(a.section, out=a.out, work=a.work, device=a.device, tiny=a.tiny, budget=a.budget) else 1


if __name__ == "__main__":
    sys.exit(main())
