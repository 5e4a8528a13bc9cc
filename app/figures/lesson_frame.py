"""What every lesson figure shares: the view a step shows (figure and headline), the name of an outline
(the tests and the browser tier find highlights by it), the normal view's height and the frame."""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from .layout import LIGHT

HIGHLIGHT = "lesson-highlight"
FIGURE_HEIGHT_PX = 400  # normal view: the figure's point above the fold of a 1280x720 screen


@dataclass(kw_only=True)
class LessonView:
    figure: go.Figure
    headline: str  # the step's one headline, in Markdown; its numbers are the figure's


def lesson_frame(fig: go.Figure, *, height: int, left: int = 70) -> go.Figure:
    """The lessons' frame: no title, the legend just above the plot (plotly widens the top margin for
    it when it wraps), `height` in normal view (presenter view lets the page size it: `present`)."""
    fig.update_layout(template=LIGHT, height=height, margin=dict(l=left, r=16, t=12, b=44, autoexpand=True),
                      legend=dict(orientation="h", xanchor="left", x=0, yref="paper", y=1.0, yanchor="bottom",
                                  font=dict(size=12), tracegroupgap=0),
                      hoverlabel=dict(namelength=0))
    return fig
