"""`zerolock bench readme`: the documentation's results blocks, regenerated from the committed result files.

A block in a page (README.md and the results pages docs/results-*.md: `PAGES`) is

    <!-- results: NAME -->
    ...what the benchmark's own formatter prints for docs/results/NAME.json...
    <!-- /results: NAME -->

and `zerolock bench readme` rewrites every block of every page from its JSON (`--check`: exit 1 if
any page differs, which the test suite checks), so a number in a block is always one a committed file
holds. Each block uses the formatter the benchmark prints with when it runs: one definition of each
table. A summary block (`SUMMARIES`) is one table over several result files, among them the README's
headline table (`format_headline`).
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import re
import sys
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results"
README = REPO / "README.md"
RESULTS_PAGE = REPO / "docs" / "results.md"  # the index of the results pages (no blocks of its own)
# the results pages by topic, each a section group of the index's Contents; a block moves with its section
TOPIC_PAGES: tuple[Path, ...] = tuple(REPO / "docs" / f"results-{topic}.md" for topic in (
    "memory-throughput", "schedules", "quality", "depth", "recovery", "dashboard"))
# every page with results blocks: what `zerolock bench readme` writes and `--check` checks
PAGES: tuple[Path, ...] = (README, RESULTS_PAGE, *TOPIC_PAGES)
BLOCK = re.compile(r"(<!-- results: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /results: (?P=name) -->)", re.S)

# the benchmark module whose formatter prints each result file, that formatter's name, and whether
# its output is plain text (fenced in the page) rather than markdown
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
    "depth": ("depth", "format_report", False),
    "wshare": ("wshare", "format_report", False),
    "hetero": ("hetero", "format_report", False),
    "schedulers": ("schedulers", "format_report", False),
    "frontier": ("frontier", "format_report", False),
}

# the result files of the README's headline table, in the order `format_headline` takes them
HEADLINE_FILES = ("memory", "throughput", "links", "envelope", "recovery", "quality", "quality-tiny-1000-k3",
                  "quality-smollm2", "quality-smollm2-affine", "hetero", "hetero-smollm2", "frontier-trec6",
                  "frontier-alpaca")

# summary blocks: one table over several result files, by a formatter of a list of reports
SUMMARIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "quality-smollm2-summary": ("quality_summary", "format_summary", (
        "quality-smollm2", "quality-smollm2-1f1b", "quality-smollm2-affine", "quality-smollm2-forward",
        "quality-smollm2-late", "quality-smollm2-qkvo", "quality-smollm2-seed1", "quality-smollm2-k2")),
    "quality-tiny-1000-summary": ("quality_summary", "format_summary",
                                  ("quality-tiny-1000-k3", "quality-tiny-1000-k2")),
    "headline": ("readme", "format_headline", HEADLINE_FILES),
    "depth-verdict": ("depth", "format_verdict", ("depth-study",)),
    "schedulers-verdict": ("schedulers", "format_verdict", ("schedulers", "schedulers-smollm2")),
    "frontier-verdict": ("frontier", "format_verdict", ("frontier-trec6", "frontier-alpaca")),
}

# where the headline table's rows point: sections of the results pages, relative to README.md (the page
# the headline block is in; the link test checks that every target and heading exists)
HEADLINE_LINKS = {
    "memory": "docs/results-memory-throughput.md#memory-paper-fig-4",
    "throughput": "docs/results-memory-throughput.md#throughput-vs-stages-paper-fig-6a",
    "links": "docs/results-memory-throughput.md#link-sensitivity-paper-fig-6b",
    "envelope": "docs/results-memory-throughput.md#batch-envelope",
    "recovery": "docs/results-recovery.md#recovery-paper-e2",
    "quality": "docs/results-quality.md#quality-paper-fig-3",
    "quality-tiny-1000": "docs/results-quality.md#does-the-tiny-models-gap-close",
    "quality-smollm2": "docs/results-quality.md#the-quality-claim-on-a-real-model",
    "hetero": "docs/results-memory-throughput.md#uneven-stages-paper-e3",
    "frontier": "docs/results-depth.md#the-frontier-at-k--4-on-trec-6-in-progress",
}


def format_headline(reports: list[dict[str, Any]]) -> str:
    """The README's few headline numbers, ours beside the paper's, each row linking its section."""
    from .common.comparison import advantage
    from .common.table import markdown_table, pct

    r = dict(zip(HEADLINE_FILES, reports))
    memory, throughput, links, envelope, recovery = (r[n] for n in HEADLINE_FILES[:5])
    quality, long, smollm2, affine, hetero, hetero_smollm2 = (r[n] for n in HEADLINE_FILES[5:11])
    frontiers = [r[n] for n in HEADLINE_FILES[11:]]

    def link(text: str, key: str) -> str:
        return f"[{text}]({HEADLINE_LINKS[key]})"

    def accuracy(report: dict[str, Any], arm: str) -> str:
        return f"{report['results'][arm]['final']['label_accuracy']['mean']:.2f}"

    def seconds(totals: dict[str, float]) -> str:
        return f"{totals['zerolock']:.1f} s / {totals['1f1b']:.1f} s"

    activation = memory["vs"]["activation"]["gpipe"]
    k2 = advantage(throughput["results"]["2"]["rows"], "measured")["gpipe"]
    k3 = advantage(throughput["results"]["3"]["rows"], "predicted")["gpipe"]
    fast, slow = (links["results"][link_]["zerolock_vs"]["1f1b"] for link_ in ("local", "constrained"))
    oom_paper, oom = envelope["paper_oom_at_batch"], {m: x["first_oom_batch"] for m, x in envelope["results"].items()}
    methods = ("zerolock", "1f1b")
    ours_s = {m: recovery["summary"][m]["total_s"]["mean"] for m in methods}
    paper_s = {m: recovery["paper"][m]["total_ms"] / 1000 for m in methods}
    zerolock = "zerolock a=0.5 reverse"

    def balanced(report: dict[str, Any]) -> str:
        gain = report["balanced_over_even"]
        return f"{gain['zerolock']:.2f}x / {gain['1f1b']:.2f}x"
    slowest = min(hetero["config"]["speeds"])
    rows = [
        [link("activation memory", "memory") + f" vs GPipe, K={memory['config']['stages']} (Fig. 4)",
         pct(activation["paper"]), pct(activation["ours"])],
        [link("throughput", "throughput") + " vs GPipe (Fig. 6a)",
         f"{pct(memory['vs']['throughput']['gpipe']['paper'])} (K=3)",
         f"{pct(k2)} measured (K=2), {pct(k3)} simulated (K=3)"],
        [link("slow link", "links") + " vs 1F1B, 1000 → 50 Mbps (Fig. 6b)", "grows as the link slows",
         f"{pct(fast)} → {pct(slow)} measured"],
        [link("first batch out of memory", "envelope") + ", GPipe / ZeroLock",
         f"b = {oom_paper['gpipe']} / {oom_paper['zerolock']}", f"b = {oom['gpipe']} / {oom['zerolock']}"],
        [link("recovery", "recovery") + ", ZeroLock local / 1F1B global (E2)", seconds(paper_s), seconds(ours_s)],
        [link("label accuracy", "quality") + f", K={quality['config']['stages']}, BP / ZeroLock α=0.5 (Fig. 3)",
         "ZeroLock tracks BP",
         f"{accuracy(quality, 'bp')} / {accuracy(quality, zerolock)} ({quality['config']['steps']} steps), "
         f"{accuracy(long, 'bp')} / {accuracy(long, zerolock)} "
         f"({link(str(long['config']['steps']), 'quality-tiny-1000')})"],
        [link("SmolLM2-135M", "quality-smollm2") + f", K={smollm2['config']['stages']}, "
         f"{smollm2['config']['steps']} steps, BP / ZeroLock α=1 / + affine adapter", "ZeroLock tracks BP",
         f"{accuracy(smollm2, 'bp')} / {accuracy(smollm2, 'zerolock a=1')} / "
         f"{accuracy(affine, 'zerolock a=1 affine adapter')}"],
        [link("uneven devices", "hetero") + f", one stage {1 / slowest:g}x slower: `--boundaries auto` over even, "
         "ZeroLock / 1F1B (E3)", "phones; how they were balanced is not said",
         f"{balanced(hetero)} measured, {balanced(hetero_smollm2)} on SmolLM2-135M"],
        frontier_row(frontiers, link("the frontier", "frontier")),
    ]
    heads = ["ZeroLock (paper's figure)", "paper: TinyLlama-1.1B, 3 GPUs", "here: 2 CPU cores, tiny model unless named"]
    return markdown_table(heads, rows)


def frontier_row(reports: list[dict[str, Any]], linked: str) -> list[str]:
    """The headline's frontier row, a cell per task at its first K: BP's level against the best arm without
    update locking (one that meets the goal, else the most accurate), its time to BP's level and its peak
    activation memory against 1F1B, and how many runs the task rests on."""
    frontier = importlib.import_module("benchmarks.frontier")  # lazy, as `formatted`'s
    cells, ks, steps = [], set(), set()
    for report in reports:
        rows = report["summary"]
        task, k = rows[0]["task"], rows[0]["K"]
        cell = [r for r in rows if (r["task"], r["K"]) == (task, k)]
        met = {g["arm"] for g in report.get("goal", []) if g["goal"] and (g["task"], g["K"]) == (task, k)}
        bp = next(r for r in cell if r["arm"] == "1f1b")
        free = max((r for r in cell if not r["locking"]),
                   key=lambda r: (r["arm"] in met, r["accuracy_mean"], -(r["time_to_bp_vs_1f1b"] or math.inf)))

        def level(r: dict[str, Any]) -> str:
            return f"NLL {r['nll_mean']:.2f}" if r.get("nll_mean") is not None else f"{r['accuracy_mean']:.2f}"

        time = ("never reaches BP's" if free["time_to_bp_vs_1f1b"] is None
                else f"{free['time_to_bp_vs_1f1b']:.2f}x the time")
        cells.append(f"{task} {level(bp)} / {free['arm']} {level(free)}: {time}, "
                     f"{free['activation_peak_vs_1f1b']:.2f}x 1F1B's activations"
                     + (", meets the goal" if free["arm"] in met else "")
                     + f" ({len(frontier.trained_runs(report, task, k))} runs)")
        ks.add(k)
        steps.add(report["config"]["steps"])
    return [f"{linked}, K={'/'.join(map(str, sorted(ks)))}, {'/'.join(map(str, sorted(steps)))} steps: "
            "BP / best without update locking", "CE-only level with BP (AG News, 1,250 steps)", "; ".join(cells)]


def formatted(report: dict[str, Any]) -> str:
    """What the report's benchmark prints for it (fenced if that is plain text)."""
    bench = report.get("bench", "")
    if bench not in FORMATTERS:
        raise ValueError(f"no formatter for a {bench!r} result; add it to FORMATTERS")
    module, name, plain = FORMATTERS[bench]
    fmt: Callable[[dict[str, Any]], str] = getattr(importlib.import_module(f"benchmarks.{module}"), name)
    text = portable(fmt(report).rstrip())
    return f"```\n{text}\n```" if plain else paragraphs(text)


# the studies' real data (issue 41) lives beside the checkout, not in it: a page names it $DATA, never by a
# path that leaves the repository (tests/test_docs_links.py)
STUDY_DATA = re.compile(r"(?:\.\./)+shared/data/")
DATA = "$DATA/"


def portable(text: str) -> str:
    """`text` with the studies' data folder written $DATA (a page must not name a path outside the repo)."""
    return STUDY_DATA.sub(DATA, text)


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
        raise ValueError(f"results block {name!r}: no result file {path}")
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
    lines = [f"`{portable(report['command'])}` → `docs/results/{name}.json`" if report.get("command") else
             f"`docs/results/{name}.json`", "", formatted(report)]
    return "\n".join(lines) + "\n"


def regenerate(text: str, results: Path = RESULTS) -> str:
    """`text` with every results block rewritten from its result file."""
    return BLOCK.sub(lambda m: m.group(1) + render(m.group("name"), results) + m.group(4), text)


def blocks(text: str) -> list[str]:
    return [m.group("name") for m in BLOCK.finditer(text)]


def shown(pages: tuple[Path, ...] = PAGES) -> set[str]:
    """Every block name on the pages."""
    return {name for page in pages for name in blocks(page.read_text())}


def _shown_path(page: Path) -> str:
    try:
        return str(page.resolve().relative_to(REPO))
    except ValueError:
        return str(page)


def update(pages: tuple[Path, ...] = PAGES, *, check: bool = False, results: Path = RESULTS) -> list[Path]:
    """Rewrite the blocks of every page (`check`: only compare); returns the pages that differed."""
    stale = []
    for page in pages:
        text = page.read_text()
        new = regenerate(text, results)
        if new != text:
            stale.append(page)
            if not check:
                page.write_text(new)
        verb = ("differ from" if new != text else "match") if check else "written from"
        print(f"{_shown_path(page)}: {len(blocks(text))} results blocks {verb} docs/results/")
    return stale


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--page", type=Path, action="append", dest="pages", metavar="FILE",
                   help="a page with results blocks (repeatable; default: "
                        + ", ".join(_shown_path(x) for x in PAGES) + ")")
    p.add_argument("--check", action="store_true",
                   help="exit 1 if any page differs from what the result files give; write nothing")

    def run(a: argparse.Namespace) -> int:
        stale = update(tuple(a.pages or PAGES), check=a.check)
        if a.check and stale:
            print(f"stale results blocks in {', '.join(_shown_path(x) for x in stale)}: run `zerolock bench readme`",
                  file=sys.stderr)
            return 1
        return 0

    p.set_defaults(func=run)
