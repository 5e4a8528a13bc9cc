"""The script the dashboard puts in its page's <head> (page_script.js): the Watch tab's status line
fetched without a Gradio event, and Gradio's second identical plotly redraw skipped."""
from __future__ import annotations

from importlib import resources
from typing import Any

from markdown_it import MarkdownIt

from .early_script import early_script_middleware

from .poll_interval import check_poll

# the page elements the script reads and writes (one definition: the Python side builds them with these)
STATUS_ID, RECOVERY_ID, DRAW_ID = "watch-status", "recovery-line", "draw-figures"
LINE_CLASS = "zerolock-line"  # the element inside a gr.HTML line that the script rewrites
HIDDEN_CLASS = "zerolock-hidden"  # the draw-figures button
HIDDEN_CSS = f".{HIDDEN_CLASS} {{ display: none !important; }}"
_MARKDOWN = MarkdownIt("commonmark", {"html": False})  # raw HTML in a run's error text is escaped


def page_head(poll_s: float) -> str:
    script = resources.files(__package__).joinpath("page_script.js").read_text(encoding="utf-8")
    values = {"__POLL_MS__": str(round(1000 * check_poll(poll_s))), "__STATUS_ID__": STATUS_ID,
              "__RECOVERY_ID__": RECOVERY_ID, "__DRAW_ID__": DRAW_ID, "__LINE_CLASS__": LINE_CLASS}
    for placeholder, value in values.items():
        script = script.replace(placeholder, value)
    return f"<script>\n{script}\n</script>"


def launch_options(poll_s: float) -> dict[str, Any]:
    """What every `demo.launch` of the dashboard passes (a fresh dict: Gradio adds to app_kwargs)."""
    return {"head": page_head(poll_s), "css": HIDDEN_CSS, "app_kwargs": {"middleware": [early_script_middleware()]}}


def line_html(markdown: str) -> str:
    """A status or recovery line (Markdown) as the HTML the script writes into the page."""
    return _MARKDOWN.render(markdown) if markdown else ""


def line_box(markdown: str = "") -> str:
    """A gr.HTML value: the line inside the element the script rewrites."""
    return f'<div class="{LINE_CLASS}">{line_html(markdown)}</div>'
