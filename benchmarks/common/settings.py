"""What every benchmark shares: the flags, the settings they make, and the run configs built from them."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from zerolock_core.train.threads import DEFAULT_THREADS
from zerolock_core.config.run_config import DataConfig, LinkConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig
from zerolock_core.methods import BASELINES, PIPELINE, names

from .machine import load_average, machine_line
from .presets import resolve_bench_model

# the pipeline methods the benchmarks compare (methods.py, controls aside): the paper's baselines, then the
# others in the registry's order (ZeroLock, zero-bubble) — every `--methods` default
METHODS = (*BASELINES, *names(where=lambda m: PIPELINE in m.runtimes and not m.baseline and not m.control))


@dataclass(kw_only=True, frozen=True)
class BenchSettings:
    model: str = "tiny"  # tiny | tinyllama-shape | a model directory | a hub id
    dataset: str = "topics"
    seq_len: int = 128
    steps: int = 4
    threads: int = DEFAULT_THREADS  # torch threads per stage process: pinned (docs/results.md, the fairness rule)
    device: str = "cpu"
    seed: int = 0
    lr: float = 2e-3
    alpha: float = 0.5
    consistency: str = "reverse"
    inflight_depth: int = 2
    eval_size: int = 1  # the performance benchmarks do not need an eval; the quality one sets its own

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"--steps must be at least 1 (got {self.steps})")
        if self.threads < 1:
            raise ValueError(
                f"--threads must be at least 1 for a benchmark (got {self.threads}): "
                "an unpinned thread count makes stages fight over the cores"
            )

    def pipeline(
        self,
        *,
        method: str,
        stages: int,
        batch: int,
        microbatches: int,
        out: Path,
        link: LinkConfig | None = None,
        memory_budget_bytes: int = 0,
        steps: int | None = None,
        seed: int | None = None,
    ) -> RunConfig:
        """A validated pipeline RunConfig (ConfigError names any bad value)."""
        return RunConfig(
            model=ModelConfig(model=resolve_bench_model(self.model)),
            data=DataConfig(dataset=self.dataset, seq_len=self.seq_len, eval_size=self.eval_size),
            objective=ObjectiveConfig(alpha=(self.alpha,), consistency=self.consistency),
            train=TrainConfig(
                runtime="pipeline",
                method=method,
                stages=stages,
                batch=batch,
                microbatches=microbatches,
                steps=self.steps if steps is None else steps,
                lr=self.lr,
                seed=self.seed if seed is None else seed,
                threads=self.threads,
                device=self.device,
                inflight_depth=self.inflight_depth,
                memory_budget_bytes=memory_budget_bytes,
            ),
            link=link or LinkConfig(),
            out=str(out),
        )


def add_common_flags(p: argparse.ArgumentParser, *, steps: int = 4, seq_len: int = 128) -> None:
    d = BenchSettings()
    g = p.add_argument_group("common benchmark flags")
    g.add_argument(
        "--model",
        default=d.model,
        help="tiny (embedded) | tinyllama-shape (TinyLlama-1.1B shape, random weights, built on "
        "first use under $ZEROLOCK_CACHE) | a model directory",
    )
    g.add_argument("--dataset", default=d.dataset, help="topics | needle | ag_news | csv:PATH")
    g.add_argument("--seq-len", type=int, default=seq_len)
    g.add_argument("--steps", type=int, default=steps, help="optimizer steps per run")
    g.add_argument("--threads", type=int, default=d.threads, help="torch threads per stage process")
    g.add_argument("--device", default=d.device, help="cpu or cuda (cuda: NCCL links; untested here)")
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument("--lr", type=float, default=d.lr)
    g.add_argument("--alpha", type=float, default=d.alpha, help="ZeroLock's α for the performance runs")
    g.add_argument("--inflight-depth", type=int, default=d.inflight_depth)
    g.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="run every pipeline config this many times, round-robin, and keep the best (least "
        "disturbed) one: for timings on a machine shared with other work",
    )
    g.add_argument("--out", default=None, help="results directory (default results/NAME-TIMESTAMP)")
    g.add_argument("--no-png", action="store_true", help="write figures as HTML instead of PNG")


def settings_from_args(a: argparse.Namespace) -> BenchSettings:
    return BenchSettings(
        model=a.model,
        dataset=a.dataset,
        seq_len=a.seq_len,
        steps=a.steps,
        threads=a.threads,
        device=a.device,
        seed=a.seed,
        lr=a.lr,
        alpha=a.alpha,
        inflight_depth=a.inflight_depth,
    )


def results_dir(name: str, out: str | None) -> Path:
    return Path(out or f"results/{name}-{time.strftime('%Y%m%d-%H%M%S')}")


def choices_arg(flag: str, allowed: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    """The argparse type of a comma-separated list of names from `allowed`."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(t.strip() for t in text.split(",") if t.strip())
        bad = [n for n in names if n not in allowed]
        if bad or not names:
            raise argparse.ArgumentTypeError(f"{flag}: {', '.join(bad) or '(none)'} not in {', '.join(allowed)}")
        return names

    return parse


methods_arg = choices_arg("--methods", METHODS)


def report_header(name: str, settings: BenchSettings | None, **extra: Any) -> dict[str, Any]:
    """What every report starts with: the command, the machine and its load, the settings (None for a
    benchmark of something else than one pipeline config, e.g. the dashboard)."""
    return {
        "bench": name,
        "command": shlex.join(["zerolock", *sys.argv[1:]]) if sys.argv[1:2] == ["bench"] else f"zerolock bench {name}",
        "machine": machine_line(settings.device if settings else "cpu"),
        "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        # 1/5/15-minute load averages as the report is written (this benchmark's own runs included):
        # a load well above the core count means other work shared the cores and timings are noisy
        "load_average": load_average(),
        "settings": asdict(settings) if settings else None,
        **extra,
    }
