"""The end of every benchmark command: figures, the JSON report, the table on the terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from zerolock_core.rundir.atomic_files import write_json_atomic

from .image_export import save_figures


def publish(
    report: dict[str, Any],
    *,
    out: Path,
    name: str,
    figures: Callable[[dict[str, Any]], dict[str, Any]],
    format_report: Callable[[dict[str, Any]], str],
    png: bool = True,
) -> str:
    """Writes out/NAME.json (+ figures) and returns the text to print."""
    report["figures"] = save_figures(figures(report), out, png=png)
    write_json_atomic(out / f"{name}.json", report)
    fig = report["figures"]
    note = f" (HTML: {fig['why_not_png']})" if fig["format"] == "html" else ""
    figures_written = f" and {len(fig['files'])} {fig['format']} figures{note}" if fig["files"] else ""
    load = "/".join(f"{x:.2f}" for x in report.get("load_average", []))
    return (
        f"command: {report['command']}\n{format_report(report)}\n"
        f"load average (1/5/15 min) at the end: {load}\n"
        f"wrote {out / (name + '.json')}{figures_written}"
    )
