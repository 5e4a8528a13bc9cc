"""Write plotly figures as PNG (kaleido + a local Chromium), or as HTML where no image export works.

kaleido 1.x drives a Chrome/Chromium it finds on PATH (Debian: `apt-get install chromium`); with
none installed `write_image` fails, and the figure is written as a self-contained HTML file instead
(the report records which format each figure got, and why).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_EXPORT_ERROR: list[str | None] = []  # cached: [None] = PNG export works, [message] = it does not


PROBE_TIMEOUT_S = 90.0  # kaleido's browser can hang at start-up (seen here: minutes, no error)
EXPORT_TIMEOUT_S = 300.0


def _with_timeout(fn, timeout_s: float) -> None:
    """Run `fn` in a daemon thread; raise TimeoutError if it has not returned in time (a hung browser
    must not hang the benchmark: its results would never be written)."""
    import threading

    box: list[BaseException | None] = []

    def target() -> None:
        try:
            fn()
            box.append(None)
        except BaseException as err:  # re-raised in the caller
            box.append(err)

    worker = threading.Thread(target=target, daemon=True, name="png-export")
    worker.start()
    worker.join(timeout_s)
    if not box:
        raise TimeoutError(f"PNG export did not finish in {timeout_s:.0f} s (kaleido's browser hung)")
    if box[0] is not None:
        raise box[0]


def png_export_error() -> str | None:
    """None when PNG export works on this machine, else why it does not (checked once)."""
    if not _EXPORT_ERROR:
        try:
            import plotly.graph_objects as go

            probe = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))
            _with_timeout(lambda: probe.to_image(format="png", width=64, height=64), PROBE_TIMEOUT_S)
            _EXPORT_ERROR.append(None)
        except Exception as err:  # kaleido missing, no browser for it, or a hung browser
            first = str(err).strip().splitlines()
            _EXPORT_ERROR.append(f"{type(err).__name__}: {first[0] if first else ''}")
    return _EXPORT_ERROR[0]


def save_figures(figs: dict[str, Any], out: Path, *, png: bool = True) -> dict[str, Any]:
    """Write each figure as out/NAME.png (or out/NAME.html). Returns {"files": [...], "format": ...}."""
    out.mkdir(parents=True, exist_ok=True)
    if not figs:  # a table-only benchmark: no browser start for nothing
        return {"files": [], "format": "none"}
    error = png_export_error() if png else "PNG export switched off (--no-png)"
    files: list[str] = []
    if error is None:
        import plotly.io as pio

        paths = [out / f"{name}.png" for name in figs]
        for path in paths:  # an earlier run's figure must not pass for this one's
            path.unlink(missing_ok=True)
        try:
            _with_timeout(lambda: pio.write_images(list(figs.values()), paths, width=1000, height=560, scale=1),
                          EXPORT_TIMEOUT_S)
            # the batch export has come back without writing one of its files: write those one by one
            for fig, path in zip(figs.values(), paths):
                if not path.exists():
                    _with_timeout(lambda: pio.write_image(fig, path, width=1000, height=560, scale=1),
                                  EXPORT_TIMEOUT_S)
            missing = [p.name for p in paths if not p.exists()]
            if missing:
                raise RuntimeError(f"the PNG export wrote no {', '.join(missing)}")
            return {"files": [str(p) for p in paths], "format": "png"}
        except Exception as err:  # fall back to HTML, saying why
            first = str(err).strip().splitlines()
            error = f"{type(err).__name__}: {first[0] if first else ''}"
    for name, fig in figs.items():
        path = out / f"{name}.html"
        fig.write_html(path, include_plotlyjs=True, full_html=True)
        files.append(str(path))
    return {"files": files, "format": "html", "why_not_png": error}
