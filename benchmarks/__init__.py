"""Benchmarks: commands that write results (JSON + tables/figures), never part of the test suite.

Each benchmark module exposes `register(parser)`; list it in BENCHMARKS to get `zerolock bench NAME`.
"""

from __future__ import annotations

import argparse
import importlib

BENCHMARKS = {
    "quick": ("benchmarks.quick", "the four pipeline methods side by side, one table"),
    "recovery": ("benchmarks.recovery", "E2: local replay (ZeroLock) vs global rollback (1F1B) after a failure"),
    "faults": ("benchmarks.faults", "the fault matrix: recovered bitwise / refused / failed, and --resume"),
    "memory": ("benchmarks.memory", "Fig. 4: per-stage peak memory of the four methods"),
    "geometry": ("benchmarks.geometry", "Fig. 5: activation peak and throughput over b and b/m"),
    "envelope": ("benchmarks.envelope", "the largest batch each method fits under --memory-budget"),
    "throughput": ("benchmarks.throughput", "Fig. 6a: samples/s and active fraction vs K"),
    "links": ("benchmarks.links", "Fig. 6b: throughput per emulated link profile"),
    "quality": ("benchmarks.quality", "Fig. 3: accuracy and NLL curves, BP / 1F1B / ZeroLock variants"),
    "depth": ("benchmarks.depth", "the gap to BP over K = 2..6 and what closes it: terminal, readouts, fair BP controls"),
    "frontier": ("benchmarks.frontier",
                 "accuracy, time and memory on one frontier: every arm without update locking vs 1F1B, ZB-H1, "
                 "DualPipe-V"),
    "readability": ("benchmarks.readability",
                    "the frozen head's readout after every layer (logit / tuned lens), where to cut chunks"),
    "stage-rss": ("benchmarks.stage_rss", "per-stage resident memory after loading, K = 1, 2, 3, 5"),
    "readout": ("benchmarks.readout", "time and memory of the readout + local loss vs vocabulary size"),
    "crosscheck": ("benchmarks.crosscheck", "our GPipe/1F1B vs torch.distributed.pipelining's"),
    "efficiency": ("benchmarks.efficiency", "throughput vs the slowest-stage bound; bubbles vs textbook"),
    "simulator": ("benchmarks.simulator", "simulator predictions vs measured runs, then extrapolations"),
    "dashboard": ("benchmarks.dashboard", "the dashboard: first bars after Run, and what watching costs the training"),
    "wshare": ("benchmarks.wshare", "zero-bubble's W (weight gradient) share of a stage's backward, LoRA vs full"),
    "schedulers": ("benchmarks.schedulers", "ZeroLock vs ZB-H1 vs 1F1B vs GPipe: measured at K=2, simulated deeper"),
    "hetero": ("benchmarks.hetero", "uneven stages (one 2.5x slower): even vs balanced boundaries, ZeroLock and 1F1B"),
    "threads": ("benchmarks.threads", "the reference trainer's samples/s per thread count, alone and beside a run"),
    "gpu": ("benchmarks.gpu.check", "the GPU check: GPU tests, E1, envelope, E2 on one CUDA machine, a JSON per section"),
    "readme": ("benchmarks.readme", "rewrite the results blocks of README.md and docs/results-*.md from docs/results/*.json"),
}


def register_benchmarks(sub: argparse._SubParsersAction) -> None:
    """One `zerolock bench NAME` per benchmark, imported only when it runs: `zerolock --help` must
    not import torch and every benchmark module. Its own flags (and --help) go to `benchmark_parser`."""
    for name, (_, help_text) in BENCHMARKS.items():
        # no flags here: everything after NAME is left over (parse_known_args) for benchmark_parser
        p = sub.add_parser(name, help=help_text, add_help=False)
        p.set_defaults(func=lambda a, name=name: run_benchmark(name, a.benchmark_argv), takes_rest=True)


def benchmark_parser(name: str) -> argparse.ArgumentParser:
    """The full parser of one benchmark (imports its module)."""
    module, help_text = BENCHMARKS[name]
    parser = argparse.ArgumentParser(prog=f"zerolock bench {name}", description=help_text)
    importlib.import_module(module).register(parser)
    return parser


def run_benchmark(name: str, argv: list[str]) -> int:
    a = benchmark_parser(name).parse_args(argv)
    return a.func(a)
