"""Lesson 6, the frontier: every way to train a K-stage pipeline on each real task of the committed frontier
study, placed by its time to backprop's level (x) and its peak activations (y), both against 1F1B's, the
goal's corner outlined. Read from the summary rows of docs/results/frontier-*.json, nothing typed in."""
from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from zerolock_core.analysis.frontier_arms import BASELINE_ARM, PIPEDREAM_ARM, RECOMPUTE_ARM, readout_arm_name
from zerolock_core.analysis.frontier_goal import GOAL
from zerolock_core.analysis.recommended import RECOMMENDED_AT_DEPTH, RECOMMENDED_MARK
from zerolock_core.config.readout_spec import DEPTH_READOUT
from zerolock_core.viz.palette import HIGHLIGHT_COLOUR, NEUTRAL, method_colour, with_alpha

from ..frontier_summary import FRONTIERS, Frontier, deepest_frontier
from .lesson_frame import FIGURE_HEIGHT_PX, HIGHLIGHT, LessonView, lesson_frame

# (arm, its name in the legend, the method whose colour it takes, its marker): the schedules a class has met,
# the two recomputes, and ZeroLock through the paper's head and its most accurate readout; the legend names
# them (labels beside the markers collide once a projector's zoom narrows the panels)
ARMS = ((BASELINE_ARM, "1F1B", "1f1b", "circle"), ("dualpipe-v", "DualPipe-V", "1f1b", "square"),
        (BASELINE_ARM + RECOMPUTE_ARM, "1F1B + recompute", "1f1b", "triangle-up"),
        (PIPEDREAM_ARM, "PipeDream", "pipedream", "diamond"),
        (RECOMMENDED_AT_DEPTH.arm, f"PipeDream + recompute {RECOMMENDED_MARK}", "pipedream", "star"),
        ("zerolock", "ZeroLock · head", "zerolock", "x"),
        (readout_arm_name(DEPTH_READOUT), f"ZeroLock · {DEPTH_READOUT}", "zerolock", "pentagon"))
NAMES = {arm: name for arm, name, _, _ in ARMS}
NEVER_X = 1.3  # where an arm that never reaches backprop's level sits (the axis' "never" column)


def frontiers(paths: tuple[Path, ...] = FRONTIERS) -> list[Frontier]:
    return [f for f in map(deepest_frontier, paths) if f is not None and f.bp is not None]


def frontier_view(paths: tuple[Path, ...] = FRONTIERS) -> LessonView:
    """One panel per task: a marker per arm (filled: it reaches backprop's level; open, in the right column:
    never), the goal's corner outlined on each."""
    shown = frontiers(paths)
    assert shown, "no committed frontier result with backprop's row"
    fig = make_subplots(rows=1, cols=len(shown), shared_yaxes=True, horizontal_spacing=0.04)
    top = max(r["activation_peak_vs_1f1b"] for f in shown for arm, r in f.rows.items() if arm in NAMES)
    for col, f in enumerate(shown, start=1):
        for arm, name, method, symbol in ARMS:
            r = f.rows.get(arm)
            if r is None:
                continue
            never = r["time_to_bp_vs_1f1b"] is None
            x = NEVER_X if never else r["time_to_bp_vs_1f1b"]
            colour = method_colour(method)
            fig.add_trace(go.Scatter(
                x=[x], y=[r["activation_peak_vs_1f1b"]], mode="markers", name=name, legendgroup=arm,
                showlegend=col == 1, cliponaxis=False,
                marker=dict(symbol=symbol + ("-open" if never else ""), size=14 if symbol == "star" else 12,
                            color=colour, line=dict(width=2 if never else 1, color=colour if never else "white")),
                hovertemplate=f"{name}<br>time to backprop's level %{{x:.2f}}× · activations %{{y:.2f}}×"
                              "<extra></extra>"), row=1, col=col)
        # the goal's corner: backprop's level in at most this much of 1F1B's time, with at most this memory
        fig.add_shape(type="rect", x0=0, x1=GOAL.time_vs_1f1b, y0=0, y1=GOAL.activation_vs_1f1b, row=1, col=col,
                      line=dict(color=HIGHLIGHT_COLOUR, width=2.5), fillcolor=with_alpha(HIGHLIGHT_COLOUR, 0.08),
                      layer="below", name=HIGHLIGHT)
        axis = "" if col == 1 else str(col)
        fig.add_annotation(text=f"<b>{f.task}</b> · K = {f.k}", xref=f"x{axis} domain", yref=f"y{axis} domain",
                           x=0.02, y=1.0, xanchor="left", yanchor="top", showarrow=False)  # the panel's task
        fig.add_vline(x=NEVER_X, line=dict(color=NEUTRAL["chance"], width=1, dash="dot"), row=1, col=col)
        fig.update_xaxes(range=[0.4, NEVER_X + 0.08], tickvals=[GOAL.time_vs_1f1b, 1.0, NEVER_X],
                         ticktext=[f"{GOAL.time_vs_1f1b:g}×", "1×", "never"], row=1, col=col)
    fig.update_yaxes(range=[0, 1.1 * top], title_text="peak activations ÷ 1F1B's", row=1, col=1)
    # one title under both panels' time axes, in a bottom margin made for it
    fig.add_annotation(text="time to backprop's level ÷ 1F1B's", xref="paper", yref="paper", x=0.5, y=0,
                       yshift=-28, yanchor="top", showarrow=False)
    lesson_frame(fig, height=FIGURE_HEIGHT_PX, left=60)
    fig.update_layout(margin_b=64)
    return LessonView(figure=fig, headline=frontier_headline(shown))


def frontier_headline(shown: list[Frontier]) -> str:
    """Which arm is in the goal's corner on each task (or what comes nearest), and whether ZeroLock's
    readouts reach backprop's level at all."""
    said = []
    for f in sorted(shown, key=lambda f: not f.meeting):  # the tasks where something is inside first
        inside = [a for a, *_ in ARMS if a in f.meeting]
        if inside:
            r = f.rows[inside[0]]
            said.append(f"on {f.task} **{NAMES[inside[0]]}** is in the goal's corner "
                        f"({r['time_to_bp_vs_1f1b']:.2f}× the time, {r['activation_peak_vs_1f1b']:.2f}× the memory)")
            continue
        r = f.rows.get(RECOMMENDED_AT_DEPTH.arm)
        said.append(f"on {f.task} nothing is" + (
            "" if r is None or r["time_to_bp_vs_1f1b"] is None else
            f": {NAMES[RECOMMENDED_AT_DEPTH.arm]} reaches backprop's level at {r['time_to_bp_vs_1f1b']:.2f}× the time"))
    zerolock = [a for a in NAMES if a.startswith("zerolock")]
    reach = any(f.rows[a]["reaches_bp"] for f in shown for a in zerolock if a in f.rows)
    return ("; ".join(said)[:1].upper() + "; ".join(said)[1:] + ". "
            + ("A ZeroLock readout reaches backprop's level on some task." if reach
               else "No ZeroLock readout reaches backprop's level on either task."))
