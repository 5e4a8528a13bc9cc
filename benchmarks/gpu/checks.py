"""The GPU checks: the NCCL pipeline against a single-process reference on the same device, the peak CUDA
memory each stage reports, and a kill + local recovery. tests/test_gpu.py runs them under pytest (`-m gpu`,
skipped without CUDA); `zerolock bench gpu`'s tests section runs that file and records every outcome.

Each check takes the shared `CheckRuns` (every run is made once, on first use) and returns what it measured
(recorded beside its outcome); it raises AssertionError when the check fails. On CPU (gloo) they run too —
`ZEROLOCK_GPU_TESTS_DEVICE=cpu` — which is how their code is kept working without a GPU.
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from zerolock_core.config.run_config import RunConfig, replace
from zerolock_core.train.determinism import deterministic_env
from ..faults import case_config, run_with_deadline

DEVICE_ENV = "ZEROLOCK_GPU_TESTS_DEVICE"  # cpu: run the checks on gloo (their code path, no GPU)
# fp32 throughout; the BP pipelines accumulate micro-batch gradients in another order than the reference,
# and the default (non-deterministic) kernels may reduce in another order from run to run
TOLERANCE = {"rtol": 1e-4, "atol": 1e-6}


@dataclass(kw_only=True, frozen=True)
class CheckShape:
    device: str = "cuda"
    stages: int = 2
    steps: int = 6
    ckpt_every: int = 2
    fail: str = "1@3:kill"
    deadline_s: float = 150.0  # one pipeline run; the section's own timeout bounds them all


@dataclass(kw_only=True)
class CheckRuns:
    """Every run the checks compare, made once under `root`: pipelines (multi-process, on the shape's device)
    and single-process references (in this process, same device), with or without deterministic kernels."""

    root: Path
    shape: CheckShape
    _pipelines: dict[str, tuple[Path, Any, float]] = field(default_factory=dict)
    _references: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)

    def config(self, name: str, *, method: str, failures: tuple[str, ...] = ()) -> RunConfig:
        s = self.shape
        cfg = case_config(self.root / name, method=method, failures=failures, stages=s.stages, steps=s.steps,
                          ckpt_every=s.ckpt_every)
        return replace(cfg, train={"device": s.device})

    def pipeline(self, method: str, *, deterministic: bool, failures: tuple[str, ...] = ()) -> tuple[Path, Any, float]:
        """(run directory, metrics, wall seconds) of a pipeline run; a run that does not end in time fails."""
        name = "-".join([method, "det" if deterministic else "default", *failures]).replace(":", "_")
        if name not in self._pipelines:
            cfg = self.config(name, method=method, failures=failures)
            t0 = time.perf_counter()
            with environment(deterministic_env(deterministic)):  # the stage processes inherit it
                metrics, ended = run_with_deadline(cfg, deadline_s=self.shape.deadline_s, overwrite=True)
            assert ended, f"{name}: the run did not end within {self.shape.deadline_s:g} s"
            assert metrics is not None and metrics.state == "finished", \
                f"{name}: {metrics.state if metrics else 'no metrics'}: {metrics.reason if metrics else ''}"
            self._pipelines[name] = (Path(cfg.out), metrics, time.perf_counter() - t0)
        return self._pipelines[name]

    def reference(self, method: str, *, deterministic: bool) -> dict[int, dict[str, Any]]:
        """The final trainable weights of the single-process reference (`bp` or `zerolock`), on CPU."""
        name = f"{method}-{'det' if deterministic else 'default'}"
        if name not in self._references:
            with environment(deterministic_env(deterministic)):
                self._references[name] = reference_weights(
                    replace(self.config("reference", method="zerolock"),
                            train={"runtime": "reference", "method": method, "ckpt_every": 0}))
        return self._references[name]


def reference_weights(cfg: RunConfig) -> dict[int, dict[str, Any]]:
    """Train `cfg` in this process with every chunk on `cfg.train.device` (the reference trainer's steps);
    the final trainable weights per chunk, copied to CPU."""
    import torch

    from zerolock_core.train.determinism import apply_from_env
    from zerolock_core.train.reference_trainer import curve_names, make_workers, train_step
    from zerolock_core.train.run_setup import build_run_setup
    from zerolock_core.train.threads import pin_threads

    pin_threads(cfg.train.threads)
    apply_from_env()
    device = torch.device(cfg.train.device)
    setup = build_run_setup(cfg)
    setup.chunks = [c.to(device) for c in setup.chunks]
    workers = make_workers(setup)
    names = curve_names(cfg.train.method, len(workers))
    for step in range(cfg.train.steps):
        train_step(setup, workers, names, step, device=device)
    return {c.index: {n: p.detach().cpu() for n, p in c.trainable_state().items()} for c in setup.chunks}


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """`values` in os.environ for the block, the previous values back after it."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def compare(got: dict[int, dict[str, Any]], want: dict[int, dict[str, Any]], *, bitwise: bool) -> float:
    """The largest absolute difference over every weight; AssertionError when not equal (bitwise) or not
    within TOLERANCE."""
    import torch

    assert sorted(got) == sorted(want) and got, (sorted(got), sorted(want))
    worst = 0.0
    for k in want:
        assert got[k].keys() == want[k].keys(), (k, sorted(got[k]), sorted(want[k]))
        for name, w in want[k].items():
            g = got[k][name].to(w.dtype)
            worst = max(worst, (g - w).abs().max().item())
            if bitwise:
                assert torch.equal(g, w), f"chunk {k} {name}: not bitwise equal (max |diff| {worst:.3g})"
            else:
                torch.testing.assert_close(g, w, **TOLERANCE, msg=lambda m, k=k, name=name: f"chunk {k} {name}: {m}")
    return worst


def final_weights(run_dir: Path) -> dict[int, dict[str, Any]]:
    from zerolock_core.rundir.artifacts import load_final_weights

    return load_final_weights(run_dir)


# ---- the checks ----------------------------------------------------------------------------------------

def zerolock_pipeline_equals_the_reference_bitwise_with_deterministic_kernels(runs: CheckRuns) -> dict[str, Any]:
    run_dir, metrics, wall_s = runs.pipeline("zerolock", deterministic=True)
    worst = compare(final_weights(run_dir), runs.reference("zerolock", deterministic=True), bitwise=True)
    return {"max_abs_diff": worst, "samples_per_s": metrics.throughput_samples_per_s, "wall_s": wall_s}


def zerolock_pipeline_is_close_to_the_reference_with_default_kernels(runs: CheckRuns) -> dict[str, Any]:
    """Within TOLERANCE; also what deterministic kernels cost (recorded, never asserted)."""
    run_dir, metrics, wall_s = runs.pipeline("zerolock", deterministic=False)
    worst = compare(final_weights(run_dir), runs.reference("zerolock", deterministic=False), bitwise=False)
    _, det, det_wall_s = runs.pipeline("zerolock", deterministic=True)
    return {"max_abs_diff": worst, "tolerance": TOLERANCE, "samples_per_s": metrics.throughput_samples_per_s,
            "deterministic_samples_per_s": det.throughput_samples_per_s,
            "deterministic_cost": 1.0 - det.throughput_samples_per_s / metrics.throughput_samples_per_s
            if metrics.throughput_samples_per_s else None, "wall_s": wall_s, "deterministic_wall_s": det_wall_s}


def bp_pipeline_matches_the_bp_reference(method: str) -> Callable[[CheckRuns], dict[str, Any]]:
    def check(runs: CheckRuns) -> dict[str, Any]:
        run_dir, metrics, _ = runs.pipeline(method, deterministic=True)
        worst = compare(final_weights(run_dir), runs.reference("bp", deterministic=True), bitwise=False)
        return {"max_abs_diff": worst, "tolerance": TOLERANCE, "samples_per_s": metrics.throughput_samples_per_s}
    return check


def every_stage_reports_its_peak_cuda_bytes(runs: CheckRuns) -> dict[str, Any]:
    """> 0 on every stage on CUDA; absent on CPU (there is no such peak there)."""
    _, metrics, _ = runs.pipeline("zerolock", deterministic=True)
    peaks = [s.get("peak_cuda_bytes") for s in metrics.per_stage]
    if runs.shape.device == "cpu":
        assert peaks == [None] * len(peaks), peaks
    else:
        assert len(peaks) == runs.shape.stages and all(isinstance(p, int) and p > 0 for p in peaks), peaks
    return {"peak_cuda_bytes": peaks}


def a_killed_stage_recovers_locally_and_ends_equal_to_the_unfailed_run(runs: CheckRuns) -> dict[str, Any]:
    base_dir, base, _ = runs.pipeline("zerolock", deterministic=True)
    run_dir, metrics, wall_s = runs.pipeline("zerolock", deterministic=True, failures=(runs.shape.fail,))
    assert [(r["failure"], r["kind"]) for r in metrics.recovery] == [(runs.shape.fail, "local")], metrics.recovery
    compare(final_weights(run_dir), final_weights(base_dir), bitwise=True)
    assert metrics.curves == base.curves
    rec = metrics.recovery[0]
    return {"recovery_total_s": rec["total_s"], "replayed_microbatches": rec["replayed_microbatches"],
            "bytes_transferred": rec["bytes_transferred"], "wall_s": wall_s}


CHECKS: dict[str, Callable[[CheckRuns], dict[str, Any]]] = {
    "zerolock_pipeline_equals_the_reference_bitwise_with_deterministic_kernels":
        zerolock_pipeline_equals_the_reference_bitwise_with_deterministic_kernels,
    "zerolock_pipeline_is_close_to_the_reference_with_default_kernels":
        zerolock_pipeline_is_close_to_the_reference_with_default_kernels,
    "gpipe_pipeline_matches_the_bp_reference": bp_pipeline_matches_the_bp_reference("gpipe"),
    "1f1b_pipeline_matches_the_bp_reference": bp_pipeline_matches_the_bp_reference("1f1b"),
    "every_stage_reports_its_peak_cuda_bytes": every_stage_reports_its_peak_cuda_bytes,
    "a_killed_stage_recovers_locally_and_ends_equal_to_the_unfailed_run":
        a_killed_stage_recovers_locally_and_ends_equal_to_the_unfailed_run,
}


def check_device() -> str | None:
    """The device the checks run on: cuda when available, cpu when DEVICE_ENV says so, else None (skip)."""
    import torch

    if os.environ.get(DEVICE_ENV) == "cpu":
        return "cpu"
    return "cuda" if torch.cuda.is_available() else None
