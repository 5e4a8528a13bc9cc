"""Plain-text tables for the terminal and the docs' results blocks (markdown pipes)."""

from __future__ import annotations

from typing import Any, Sequence


def fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and spec:
        return format(value, spec)
    return str(value)


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1%}"


def mib(nbytes: float | None) -> str:
    return "—" if nbytes is None else f"{nbytes / 2**20:.2f}"


def joined(values: Sequence[float], spec: str = ".2f", sep: str = " ") -> str:
    """Numbers in one cell: "0.91 0.88"."""
    return sep.join(format(v, spec) for v in values)


def preamble(report: dict[str, Any], *lines: str) -> list[str]:
    """The first lines of every printed report: the machine, then what the experiment says of its setup."""
    return [f"machine: {report['machine']}", *lines]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep, *(line(r) for r in cells[1:])])
