"""`zerolock bench faults`: the fault matrix as a table, and the latency of --resume.

Every case runs the same small pipeline with failures injected at exact points (see
runtime/fault_injection.py) and is classified against the unfailed run of its method:
recovered bitwise / recovered but different (a bug) / refused up front / failed / did not end.
The case tables are defined here once; tests/test_fault_tolerance.py runs them too.
"""
from __future__ import annotations

import argparse
import collections
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.rundir.atomic_files import write_json_atomic
from zerolock_core.config.field_words import ConfigError
from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
from zerolock_core.methods import refusal
from zerolock_core.runtime.recovery_phases import PHASES, field, phase_columns
from zerolock_core.rundir.run_dir import RunDir
from .common.machine import load_average
from .common.settings import machine_line, results_dir

if TYPE_CHECKING:
    from zerolock_core.rundir.metrics import Metrics

MODES = ("kill", "stop", "post-step", "mid-ckpt")
STEPS = 6
DEADLINE_S = 400.0  # a normal run of this shape takes 20-60 s on a busy 2-core machine

# every case that hung or failed before (issue 11), and one of each mechanism
CI_CASES: list[tuple[str, tuple[str, ...]]] = [
    ("zerolock", ("2@3:kill",)),  # the last stage: the relink sent a micro-batch twice and stalled
    ("zerolock", ("2@3:kill",)),  # ... intermittently: once more
    ("zerolock", ("1@3:post-step",)),
    ("zerolock", ("1@3:mid-ckpt", "0@4:kill")),  # a failure while another's recovery is under way
    ("zerolock", ("1@4:mid-ckpt", "0@4:kill")),
    ("zerolock", ("0@3:stop",)),
    ("zerolock", ("1@2:kill", "1@4:kill")),  # the same stage twice: the second fires in generation 1
    ("zerolock", ("0@1:kill", "2@5:post-step")),  # at step 1 and at the last step
    ("1f1b", ("1@3:kill",)),
    ("gpipe", ("2@3:post-step", "0@4:kill")),  # a failure after a global rollback fires too
    ("zb-h1", ("1@3:kill",)),  # global rollback: every W runs before its window's STEP, so a checkpoint is whole
]

MATRIX_CASES: list[tuple[str, tuple[str, ...]]] = [
    (method, (f"{stage}@3:{mode}",)) for method in ("zerolock", "1f1b", "gpipe") for mode in MODES
    for stage in (0, 1, 2)] + [
    ("zerolock", ("0@2:kill", "2@2:kill")),  # two stages at once
    ("zerolock", ("1@3:kill", "1@3:post-step")),  # one failure right after another, same stage
    ("zerolock", ("1@3:mid-ckpt", "0@4:kill")),
    ("zerolock", ("2@3:kill", "1@3:post-step")),
    ("1f1b", ("1@2:kill", "2@4:stop")),
    ("pipedream", ("1@3:kill",)),  # refused up front
]


def case_config(out: Path, *, method: str, failures=(), stages: int = 3, steps: int = STEPS,
                ckpt_every: int = 2) -> RunConfig:
    return RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                     train=TrainConfig(runtime="pipeline", method=method, stages=stages, batch=4, microbatches=4,
                                       steps=steps, threads=1, ckpt_every=ckpt_every, failures=tuple(failures),
                                       heartbeat_timeout_s=2.0, final_eval=False),
                     out=str(out))


def run_with_deadline(cfg: RunConfig, *, deadline_s: float = DEADLINE_S, overwrite: bool = False,
                      resume: bool = False) -> tuple["Metrics | None", bool]:
    """(metrics, ended): a run that does not end within the deadline is stopped and reported."""
    from zerolock_core.jobs.pipeline_job import Run

    run = Run(cfg, overwrite=overwrite, resume=resume).start()
    metrics = run.wait(timeout=deadline_s)
    if not run.done:
        run.stop(timeout=30)
        return run.metrics, False
    return metrics, True


def bitwise_equal(a_dir: Path, b_dir: Path) -> bool:
    import torch

    a, b = load_final_weights(a_dir), load_final_weights(b_dir)
    return bool(a) and sorted(a) == sorted(b) and all(
        sorted(a[k]) == sorted(b[k]) and all(torch.equal(a[k][n], b[k][n]) for n in a[k]) for k in a)


def classify(out: Path, baseline: Path, method: str, failures: tuple[str, ...]) -> dict[str, Any]:
    row: dict[str, Any] = {"method": method, "failures": list(failures)}
    t0 = time.monotonic()
    try:
        cfg = case_config(out, method=method, failures=failures)
    except ConfigError as err:
        return {**row, "outcome": "refused", "reason": str(err)}
    metrics, ended = run_with_deadline(cfg, overwrite=True)
    row["wall_s"] = time.monotonic() - t0
    if not ended:
        return {**row, "outcome": "did not end", "reason": f"no end within {DEADLINE_S:g} s"}
    if metrics.state != "finished":
        return {**row, "outcome": metrics.state, "reason": metrics.reason}
    recs = metrics.recovery
    row.update(outcome="recovered bitwise" if bitwise_equal(baseline, out) else "recovered, DIFFERENT",
               recoveries=len(recs), kinds=sorted({r["kind"] for r in recs}),
               not_injected=metrics.failures_not_injected,
               **{k: sum(r[k] for r in recs) for k in (*(field(p) for p in PHASES), "total_s",
                                                         "replayed_microbatches")})
    return row


def resume_latency(root: Path, baseline: Path) -> dict[str, Any]:
    """SIGKILL a `zerolock train` process once every stage has a checkpoint; time how long its
    stages take to exit on their own, then resume it and check it against the unfailed run."""
    import psutil

    from zerolock_core.runtime.checkpoint import CheckpointStore

    d = root / "resume"
    cfg = case_config(d, method="zerolock")
    args = ["train", "--runtime", "pipeline", "--method", "zerolock", "--stages", "3", "--batch", "4",
            "--microbatches", "4", "--steps", str(STEPS), "--seq-len", "32", "--eval-size", "8", "--threads", "1",
            "--ckpt-every", "2", "--heartbeat-timeout", "2", "--out", str(d), "--quiet", "--overwrite",
            "--no-final-eval"]
    proc = subprocess.Popen([sys.executable, "-m", "zerolock_core", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    try:
        while not all(2 in CheckpointStore(RunDir(d), stage=s).verified_steps() for s in range(3)):
            if proc.poll() is not None or time.monotonic() - t0 > DEADLINE_S:
                return {"outcome": "no checkpoints before the run ended"}
            time.sleep(0.05)
        stages = psutil.Process(proc.pid).children(recursive=True)
        os.kill(proc.pid, signal.SIGKILL)
        t_kill = time.monotonic()
        _, alive = psutil.wait_procs(stages, timeout=30)
        orphans_exit_s = time.monotonic() - t_kill
    finally:
        proc.kill()
    t1 = time.monotonic()
    metrics, ended = run_with_deadline(cfg, resume=True)
    return {"outcome": "resumed bitwise" if ended and metrics.state == "finished" and bitwise_equal(baseline, d)
            else f"resume {'did not end' if not ended else metrics.state}",
            "orphans_left": len(alive), "orphans_exit_s": orphans_exit_s,
            "resumed_from_step": metrics.resumed_from_step if metrics else None,
            "resume_wall_s": time.monotonic() - t1, "resume_setup_s": metrics.setup_s if metrics else None}


def run_faults(*, out: Path, cases: list[tuple[str, tuple[str, ...]]], repeat: int, with_resume: bool) -> dict:
    baselines = {}
    for method in sorted({m for m, _ in cases if not refusal(m)}):
        d = out / f"baseline-{method}"
        metrics, ended = run_with_deadline(case_config(d, method=method), overwrite=True)
        if not ended or metrics.state != "finished":
            raise RuntimeError(f"the unfailed {method} run did not finish: {metrics.reason if metrics else ''}")
        baselines[method] = d
    rows = []
    for r in range(repeat):
        for i, (method, failures) in enumerate(cases):
            name = f"{i:02d}-{method}-{'-'.join(failures).replace(':', '_').replace('@', 'at')}-r{r}"
            row = classify(out / name, baselines.get(method, out / "none"), method, failures)
            print(f"  {method:<9} {' '.join(failures):<28} {row['outcome']}", flush=True)
            rows.append(row)
    report = {"bench": "faults", "command": shlex.join(["zerolock", *sys.argv[1:]]),
              "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine_line(),
              "load_average": load_average(),
              "config": {"stages": 3, "batch": 4, "microbatches": 4, "steps": STEPS, "seq_len": 32,
                         "ckpt_every": 2, "repeat": repeat}, "cases": rows}
    if with_resume:
        report["resume"] = resume_latency(out, baselines["zerolock"])
    write_json_atomic(out / "faults.json", report)
    return report


def format_table(report: dict[str, Any]) -> str:
    columns = [*phase_columns(report["cases"]), ("total", "total_s")]
    lines = [f"machine: {report['machine']}  (load {report['load_average']})",
             f"{'method':<10}{'failures':<30}{'outcome':<20}" + "".join(f"{name + ' s':>{len(name) + 5}}"
                                                                     for name, _ in columns) + f"{'replayed mb':>12}"]
    for r in report["cases"]:
        nums = "".join(f"{r[k]:>{len(name) + 5}.2f}" if k in r else f"{'–':>{len(name) + 5}}" for name, k in columns)
        lines.append(f"{r['method']:<10}{' '.join(r['failures']):<30}{r['outcome']:<20}{nums}"
                     f"{r.get('replayed_microbatches', '–'):>12}")
    outcomes = collections.Counter(r["outcome"] for r in report["cases"])
    lines.append("outcomes: " + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items())))
    if "resume" in report:
        x = report["resume"]
        lines.append(f"resume after SIGKILL of the coordinator: {x['outcome']}; stages exited on their own in "
                     f"{x.get('orphans_exit_s', 0):.2f} s ({x.get('orphans_left')} left); resumed from step "
                     f"{x.get('resumed_from_step')} in {x.get('resume_wall_s', 0):.1f} s")
    return "\n".join(lines)


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cases", choices=("ci", "matrix"), default="matrix",
                   help="ci: the subset the test suite runs; matrix: mode x stage x method and the combined cases")
    p.add_argument("--only", default="", help="only cases whose method or failure contains this text")
    p.add_argument("--repeat", type=int, default=1, help="run every case this many times (races show up)")
    p.add_argument("--no-resume", action="store_true", help="skip the --resume latency measurement")
    p.add_argument("--out", default=None)

    def run(a: argparse.Namespace) -> int:
        if a.repeat < 1:
            raise ConfigError(f"--repeat must be at least 1 (got {a.repeat})")
        cases = [(m, f) for m, f in (CI_CASES if a.cases == "ci" else MATRIX_CASES)
                 if not a.only or a.only in m or any(a.only in x for x in f)]
        if not cases:
            raise ConfigError(f"--only {a.only!r} matches no case")
        out = results_dir("faults", a.out)
        report = run_faults(out=out, cases=cases, repeat=a.repeat, with_resume=not a.no_resume)
        print(format_table(report))
        print(f"wrote {out}/faults.json")
        bad = [r for r in report["cases"] if r["outcome"] not in ("recovered bitwise", "refused")]
        return 1 if bad else 0

    p.set_defaults(func=run)
