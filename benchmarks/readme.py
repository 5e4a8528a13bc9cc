"""`zerolock bench readme`: the README's results blocks, regenerated from the committed result files.

A block in README.md is

    <!-- results: NAME -->
    ...what the benchmark's own formatter prints for docs/results/NAME.json...
    <!-- /results: NAME -->

and `zerolock bench readme` rewrites every block from its JSON (`--check`: exit 1 if the README
differs, which the test suite checks), so a number in a block is always one a committed file holds.
Each block uses the formatter the benchmark prints with when it runs: one definition of each table.
"""
from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results"
README = REPO / "README.md"
BLOCK = re.compile(r"(<!-- results: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /results: (?P=name) -->)", re.S)

# the benchmark module whose formatter prints each result file, that formatter's name, and whether
# its output is plain text (fenced in the README) rather than markdown
FORMATTERS: dict[str, tuple[str, str, bool]] = {
    **{name: (name, "format_report", False) for name in (
        "memory", "efficiency", "simulator", "throughput", "links", "geometry", "envelope", "readout", "crosscheck")},
    "stage-rss": ("stage_rss", "format_report", False),
    "faults": ("faults", "format_table", True),
    "readability": ("readability", "format_report", False),
    "quality": ("quality", "format_report", False),
    "recovery": ("recovery", "format_table", True),
    "dashboard": ("dashboard", "format_report", True),
    "threads": ("threads", "format_report", False),
}


# summary blocks: one table over several result files, by a formatter of a list of reports
SUMMARIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "quality-smollm2-summary": ("quality_summary", "format_summary", (
        "quality-smollm2", "quality-smollm2-1f1b", "quality-smollm2-affine", "quality-smollm2-forward",
        "quality-smollm2-late", "quality-smollm2-qkvo", "quality-smollm2-seed1", "quality-smollm2-k2")),
    "quality-tiny-1000-summary": ("quality_summary", "format_summary",
                                  ("quality-tiny-1000-k3", "quality-tiny-1000-k2")),
}


def formatted(report: dict[str, Any]) -> str:
    """What the report's benchmark prints for it (fenced if that is plain text)."""
    bench = report.get("bench", "")
    if bench not in FORMATTERS:
        raise ValueError(f"no README formatter for a {bench!r} result; add it to FORMATTERS")
    module, name, plain = FORMATTERS[bench]
    fmt: Callable[[dict[str, Any]], str] = getattr(importlib.import_module(f"benchmarks.{module}"), name)
    text = fmt(report).rstrip()
    return f"```\n{text}\n```" if plain else paragraphs(text)


def paragraphs(text: str) -> str:
    """Markdown of printed text: every line of text its own paragraph, a table after a blank line."""
    out: list[str] = []
    for line in text.splitlines():
        if out and out[-1] and line and not (line.startswith("|") and out[-1].startswith("|")):
            out.append("")
        out.append(line)
    return "\n".join(out)


def _load(name: str, results: Path) -> dict[str, Any]:
    path = results / f"{name}.json"
    if not path.exists():
        raise ValueError(f"README block {name!r}: no result file {path}")
    return json.loads(path.read_text())


def render(name: str, results: Path = RESULTS) -> str:
    """A block's text: the result file's command, then what its benchmark prints (a summary block:
    the files it summarises, then its table)."""
    if name in SUMMARIES:
        module, fn, names = SUMMARIES[name]
        summarise = getattr(importlib.import_module(f"benchmarks.{module}"), fn)
        files = ", ".join(f"`docs/results/{n}.json`" for n in names)
        return f"From {files}:\n\n{paragraphs(summarise([_load(n, results) for n in names]).rstrip())}\n"
    report = _load(name, results)
    lines = [f"`{report['command']}` → `docs/results/{name}.json`" if report.get("command") else
             f"`docs/results/{name}.json`", "", formatted(report)]
    return "\n".join(lines) + "\n"


def regenerate(text: str, results: Path = RESULTS) -> str:
    """`text` with every results block rewritten from its result file."""
    return BLOCK.sub(lambda m: m.group(1) + render(m.group("name"), results) + m.group(4), text)


def blocks(text: str) -> list[str]:
    return [m.group("name") for m in BLOCK.finditer(text)]


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--readme", type=Path, default=README)
    p.add_argument("--check", action="store_true", help="exit 1 if the README differs from what the files give")

    def run(a: argparse.Namespace) -> int:
        text = a.readme.read_text()
        new = regenerate(text)
        if a.check:
            if new != text:
                print(f"{a.readme}: results blocks differ from docs/results/ (run zerolock bench readme)",
                      file=sys.stderr)
                return 1
            print(f"{a.readme}: {len(blocks(text))} results blocks match docs/results/")
            return 0
        if new != text:
            a.readme.write_text(new)
        print(f"{a.readme}: {len(blocks(text))} results blocks written from docs/results/")
        return 0

    p.set_defaults(func=run)
