"""The figure pieces every benchmark draws with, in the colours of zerolock_core/viz/palette.py (a method's
series in its colour, a second estimate of the same quantity fainter: `palette.estimate_colour`).

plotly is imported on first use: `zerolock bench NAME --help` must not pay for it.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from zerolock_core.viz.palette import NEUTRAL, estimate_colour, method_colour

# the simulated (or measured) value drawn as a dark cross over its method's bar
CROSS = {"symbol": "x", "size": 10, "color": NEUTRAL["ink"]}
# bar fill patterns: a second cue where bars of one method stack or stand side by side
PATTERNS = ("", "/", ".", "x")


def figure(traces: Iterable[Any] = (), **layout: Any):
    """A figure of `traces` with `layout` (keywords of `update_layout`)."""
    import plotly.graph_objects as go

    return go.Figure(list(traces)).update_layout(**layout)


def panels(titles: Sequence[str], **options: Any):
    """One row of subplots, one per title (`options`: make_subplots keywords, e.g. shared_yaxes)."""
    from plotly.subplots import make_subplots

    return make_subplots(rows=1, cols=len(titles), subplot_titles=list(titles), **options)


def bar(name: str, x: Iterable[Any], y: Iterable[Any], *, method: str | None = None, **options: Any):
    """A bar trace; `method` colours it as that method everywhere."""
    import plotly.graph_objects as go

    if method is not None:
        options.setdefault("marker_color", method_colour(method))
    return go.Bar(name=name, x=list(x), y=list(y), **options)


def method_bars(name: str, x: Sequence[Any], y: Iterable[Any], *, methods: Sequence[str] | None = None,
                estimate: int = 0, pattern: int = 0, **options: Any):
    """Bars over `x`, each in the colour of its method (`methods`, default x itself: one bar per method);
    `estimate` > 0: the estimate-th other estimate of the quantity, fainter; `pattern`: its fill pattern."""
    colours = [estimate_colour(method_colour(m), estimate) for m in (x if methods is None else methods)]
    if pattern:
        options["marker_pattern_shape"] = PATTERNS[pattern]
    return bar(name, x, y, marker_color=colours, **options)


def cross(name: str, x: Iterable[Any], y: Iterable[Any], *, group: str):
    """Black crosses over the bars of offset group `group`: the other estimate of the same quantity."""
    import plotly.graph_objects as go

    return go.Scatter(name=name, x=list(x), y=list(y), mode="markers", offsetgroup=group, marker=CROSS)


def curve(name: str, x: Iterable[Any], y: Iterable[Any], *, color: str | None = None, markers: bool = True,
          **options: Any):
    """A line (with markers unless `markers=False`); `color` sets the line's colour."""
    import plotly.graph_objects as go

    if color is not None:
        options["line"] = {"color": color, **options.get("line", {})}
    if markers:
        options.setdefault("mode", "lines+markers")
    return go.Scatter(name=name, x=list(x), y=list(y), **options)


def bars_and_crosses(groups: list[tuple[str, list[str], tuple[str, list[Any]], tuple[str, list[Any]] | None]],
                     title: str):
    """Per (method, x, (name, bar heights), (name, crosses) or None): the method's bars, one estimate of the
    samples/s, with the other estimate as dark crosses over them."""
    traces = []
    for m, x, (bar_name, bars), crosses in groups:
        traces.append(bar(bar_name, x, bars, method=m, offsetgroup=m))
        if crosses is not None:
            traces.append(cross(crosses[0], x, crosses[1], group=m))
    return figure(traces, barmode="group", scattermode="group", yaxis_title="samples/s", title=title)


def spread_labels(points: Sequence[tuple[float, float]], *, x_near: float, gap: float,
                  widths: Sequence[float] | None = None) -> list[float]:
    """A y for each point's label such that two labels whose extents overlap in x (a label of width `w`
    spans [x − w, x]: right-anchored at its point; `widths` None: 0, each a point) stand at least `gap`
    apart, each as near its point as that allows, moved only up (a column of markers on a figure's edge,
    a long label over its neighbour's). `x_near`: extents closer than it count as overlapping."""
    w = list(widths) if widths is not None else [0.0] * len(points)
    label_y = [y for _, y in points]
    order = sorted(range(len(points)), key=lambda i: points[i][1])
    placed: list[int] = []

    def overlap(i: int, j: int) -> bool:
        (xi, _), (xj, _) = points[i], points[j]
        return xi - w[i] - x_near <= xj and xj - w[j] - x_near <= xi

    for i in order:
        while True:
            hit = [label_y[j] for j in placed if overlap(i, j) and abs(label_y[j] - label_y[i]) < gap - 1e-12]
            if not hit:
                break
            label_y[i] = max(hit) + gap
        placed.append(i)
    return label_y


PLOT_PX = 600.0  # the plot area's width in a 1000 px figure (image_export.py's) with its legend on the right


def label_px(text: str, *, char_px: float = 7.0, pad_px: float = 16.0) -> float:
    """A label's width in pixels, generously: a character of the 12 px font, and its offset from its marker
    and a little air."""
    return len(text) * char_px + pad_px


def left_edge_for_labels(anchors: Sequence[tuple[float, str]], right: float, *, plot_px: float = PLOT_PX) -> float:
    """The least x axis start at which every label, its right end at its anchor's x (`xanchor="right"`),
    fits inside the plot: a label `w` px wide needs (x − left) / (right − left) ≥ w / plot_px."""
    left = min((x for x, _ in anchors), default=0.0)
    for x, text in anchors:
        f = min(label_px(text) / plot_px, 0.9)  # a label wider than the plot: 90 % of it
        left = min(left, (x - f * right) / (1 - f))
    return left
