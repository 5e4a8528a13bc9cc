"""Toasts: a warning read once, that goes by itself. Every toast of the dashboard is made here, so they
all last as long."""
from __future__ import annotations

import gradio as gr

# long enough to read one line, short enough not to sit over the page (Gradio's default is 10 s)
WARNING_TOAST_S = 5.0


def warn(message: str) -> None:
    """A warning toast of WARNING_TOAST_S (outside a Gradio request: a Python warning)."""
    gr.Warning(message, duration=WARNING_TOAST_S)
