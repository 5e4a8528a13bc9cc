"""`zerolock bench gpu --out DIR`: everything GPU in the project, in one command, on one CUDA machine —
tests (the GPU tests, pytest -m gpu), e1 (TinyLlama shape: throughput, per-stage CUDA peaks, activations,
bubble), envelope (largest b under an activation budget), e2 (a kill at stage 1: ZeroLock vs 1F1B, warm
standby too), in that order, within 8 minutes on one H200 (each section's timeout: gpu_plan.py).

Each section runs in a process of its own and writes DIR/NAME.json as it ends; a section that fails or
passes its timeout is recorded with its error and the next one runs; the command exits 1 at the end if any
failed. A section whose JSON exists already is skipped (resume) unless --force. `--device cpu --tiny` is
the dry run: every section's code path on the tiny model over gloo, in about a minute.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from zerolock_core.config.arg_types import bytes_arg
from zerolock_core.rundir.atomic_files import read_json, read_json_lines, write_json_atomic
from .plan import SECTIONS, full_plan, tiny_plan
from .sections import REPO, progress_path
from ..common.settings import choices_arg, results_dir

EXIT_NO_CUDA = 2
KILL_GRACE_S = 15.0  # after SIGTERM at a timeout, before SIGKILL
sections_arg = choices_arg("--only/--skip", SECTIONS)


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, help="results directory: one NAME.json per section (default "
                                               "results/gpu-TIMESTAMP)")
    p.add_argument("--work", default=None, help="where the runs' directories go (default OUT/work)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: the dry run (with --tiny)")
    p.add_argument("--tiny", action="store_true", help="the tiny model and shapes: seconds, not minutes")
    p.add_argument("--only", type=sections_arg, default=SECTIONS, help=f"comma-separated, from {', '.join(SECTIONS)}")
    p.add_argument("--skip", type=sections_arg, default=(), help="comma-separated sections not to run")
    p.add_argument("--force", action="store_true", help="run a section again even if its JSON exists")
    p.add_argument("--memory-budget", type=bytes_arg, default=None,
                   help="the envelope's activation budget per stage (default: calibrated from E1's GPipe run)")
    p.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every section's timeout")
    p.set_defaults(func=run_gpu_check)


def run_gpu_check(a: argparse.Namespace) -> int:
    if a.timeout_scale <= 0:
        raise ValueError(f"--timeout-scale must be positive (got {a.timeout_scale})")
    if a.device == "cuda" and not cuda_available():
        print("zerolock bench gpu: --device cuda but torch sees no CUDA device (the dry run: --device cpu --tiny)",
              file=sys.stderr)
        return EXIT_NO_CUDA
    out = results_dir("gpu", a.out)
    work = Path(a.work) if a.work else out / "work"
    out.mkdir(parents=True, exist_ok=True)
    plan = tiny_plan() if a.tiny else full_plan()
    failed = []
    for name in (s for s in SECTIONS if s in a.only and s not in a.skip):
        if (out / f"{name}.json").exists() and not a.force:
            print(f"{name}: skipped, {out / (name + '.json')} exists (--force to run it again)", flush=True)
            continue
        timeout_s = plan.timeouts_s[name] * a.timeout_scale
        print(f"{name}: running (timeout {timeout_s:.0f} s) ...", flush=True)
        ok = run_section_process(name, out=out, work=work, device=a.device, tiny=a.tiny,
                                 budget=a.memory_budget, timeout_s=timeout_s)
        report = read_json(out / f"{name}.json") or {}
        print(f"{name}: {'ok' if ok else 'FAILED'} in {report.get('wall_s', 0):.0f} s"
              + ("" if ok else f": {last_line(report.get('error'))}"), flush=True)
        if not ok:
            failed.append(name)
    print(f"wrote {out}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def last_line(text: str | None) -> str:
    return (text or "see the JSON").strip().splitlines()[-1]


def run_section_process(name: str, *, out: Path, work: Path, device: str, tiny: bool, budget: int | None,
                        timeout_s: float) -> bool:
    """Run the section in a process group of its own; stop the whole group (its runs' stage processes too)
    at the timeout. Its JSON is written by the section, or here when it never wrote one."""
    cmd = [sys.executable, "-m", "benchmarks.gpu.sections", name, "--out", str(out), "--work", str(work),
           "--device", device, *(["--tiny"] if tiny else []), *(["--budget", str(budget)] if budget else [])]
    # the repo importable in the section and in every process it starts, wherever this command was run from
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
    (out / f"{name}.json").unlink(missing_ok=True)  # --force: the old result is not this run's
    t0 = time.perf_counter()
    log = out / f"{name}.log"  # a file, not a pipe: a stage process that outlives the section cannot hold it open
    with open(log, "w") as fh:
        child = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=fh, stderr=subprocess.STDOUT)
    try:
        child.wait(timeout=timeout_s)
        error = None if child.returncode in (0, 1) else f"the section's process exited with {child.returncode}"
    except subprocess.TimeoutExpired:
        stop_group(child)
        error = f"timed out after {timeout_s:.0f} s (stopped)"
    if error is not None or not (out / f"{name}.json").exists():
        write_json_atomic(out / f"{name}.json", {
            "section": name, "device": device, "tiny": tiny, "ok": False,
            "error": error or "the section ended without writing its result", "wall_s": time.perf_counter() - t0,
            "timeout_s": timeout_s, "progress": read_json_lines(progress_path(out, name)),
            "output_tail": log.read_text(errors="replace")[-4000:]})
    return bool((read_json(out / f"{name}.json") or {}).get("ok"))


def stop_group(child: subprocess.Popen) -> None:
    """SIGTERM to the section's process group (its runs' stage processes too), SIGKILL after a grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=KILL_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
