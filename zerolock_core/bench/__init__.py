"""Benchmarks: commands that write results (JSON + tables/figures), never part of the test suite.

Each benchmark module exposes `register(parser)`; list it in BENCHMARKS to get `zerolock bench NAME`.
"""

from __future__ import annotations

import argparse
import importlib

BENCHMARKS = {
    "quick": ("zerolock_core.bench.quick", "the four pipeline methods side by side, one table"),
}


def register_benchmarks(sub: argparse._SubParsersAction) -> None:
    for name, (module, help_text) in BENCHMARKS.items():
        importlib.import_module(module).register(sub.add_parser(name, help=help_text))
