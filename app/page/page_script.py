"""The script the dashboard puts in its page's <head> (page_script.js): the Watch tab's status line,
figures, table and status JSON fetched and drawn without a Gradio event, only while the Watch tab
shows and only what is on screen and changed; the switch to Watch after Run / Open / Resume; and
Gradio's second identical plotly redraw (the other tabs) skipped. Also the HTML it writes."""
from __future__ import annotations

import html
import inspect
import json
from importlib import resources
from typing import Any, Sequence

from markdown_it import MarkdownIt

from zerolock_core.viz.poll_interval import FIGURES_EVERY_S, check_poll
from ..data_uploads import UPLOAD_LIMIT_BYTES
from ..login_guard import LoginBackoff, login_guard_middleware
from .early_script import early_script_middleware
from .plotly_asset import plotly_asset_middleware, plotly_path, plotly_version
from .watch_parts import FAILURE, HOLDER_CLASS, JUMP_ID, PARTS, PLOT_PARTS, UNIT_ID, WINDOW_ID

# the page elements the script reads and writes (one definition: the Python side builds them with these)
STATUS_ID, RECOVERY_ID = "watch-status", "recovery-line"
INJECT_ID = "failure-result"  # the Inject panel's note on the watched run
RUNS_TABLE_ID = "runs-table"
WATCH_TAB_ID = "tab-watch"  # Gradio gives the tab's button the id f"{WATCH_TAB_ID}-button"
SHOW_WATCH_EVENT = "zerolock-show-watch"  # a DOM event: the script switches to Watch and draws afresh
LINE_CLASS = "zerolock-line"  # the element inside a gr.HTML line that the script rewrites
TABLE_CLASS = "zerolock-table"
PAGE_CSS = f"""
.{TABLE_CLASS} {{ border-collapse: collapse; width: 100%; font-size: 14px; }}
.{TABLE_CLASS} th, .{TABLE_CLASS} td {{ border: 1px solid var(--border-color-primary, #e5e7eb);
  padding: 6px 10px; text-align: left; }}
.{TABLE_CLASS} th {{ font-weight: 600; background: var(--background-fill-secondary, #f9fafb); }}
.{TABLE_CLASS} caption {{ caption-side: top; text-align: left; padding: 4px 0; font-size: 13px;
  color: var(--body-text-color-subdued, #6b7280); }}
#{RUNS_TABLE_ID} .wrap {{ overflow-wrap: normal; word-break: normal; }}  /* between words only */
#{PARTS["status"]} summary {{ cursor: pointer; padding: 8px 0; }}
#{PARTS["status"]} pre {{ max-height: 420px; overflow: auto; font-size: 12px; }}
"""
# Presenter view: a class on <body> (the header's toggle, or ?presenter=1) that enlarges the type and hides
# what distracts a room (elements given ADVANCED_CLASS: the form's advanced fields, status JSON, guides)
PRESENTER_CLASS, ADVANCED_CLASS, PRESENTER_ID = "zl-presenter", "zl-advanced", "presenter-toggle"
PAGE_CSS += f"""
body.{PRESENTER_CLASS} .{ADVANCED_CLASS} {{ display: none !important; }}
body.{PRESENTER_CLASS} {{ --text-sm: 16px; --text-md: 19px; --text-lg: 22px; --text-xl: 26px; }}
body.{PRESENTER_CLASS} .prose {{ font-size: 17px; line-height: 1.35; }}
body.{PRESENTER_CLASS} .gradio-container {{ padding-top: 0 !important; }}
body.{PRESENTER_CLASS} #lesson-step > span, body.{PRESENTER_CLASS} #lesson-step .block-info {{ display: none; }}
body.{PRESENTER_CLASS} #lesson-step label {{ padding: 2px 8px !important; font-size: 15px; }}
body.{PRESENTER_CLASS} #lesson-step .wrap {{ gap: 4px !important; }}
"""
PRESENTER_JS = f"(on) => {{ document.body.classList.toggle('{PRESENTER_CLASS}', !!on); return on; }}"
PRESENTER_FROM_URL_JS = "() => new URLSearchParams(window.location.search).get('presenter') === '1'"
_MARKDOWN = MarkdownIt("commonmark", {"html": False})  # raw HTML in a run's error text is escaped
# the `js` of the step after Run / Open / Resume: its input is the hidden "show Watch" checkbox they set
# when they started or opened something (a gr.Tabs output instead would make every later Gradio event
# snapshot the whole Tabs subtree: ~150 ms of the browser's main thread per event, measured)
SHOW_WATCH_JS = f"(show) => {{ if (show) document.dispatchEvent(new Event('{SHOW_WATCH_EVENT}')); }}"


def figures_every_s(poll_s: float) -> float:
    """How often the figures may be redrawn: FIGURES_EVERY_S, or the status line's poll if longer."""
    return max(FIGURES_EVERY_S, check_poll(poll_s))


def page_head(poll_s: float) -> str:
    script = resources.files(__package__).joinpath("page_script.js").read_text(encoding="utf-8")
    values = {"__POLL_MS__": str(round(1000 * check_poll(poll_s))),
              "__FIGURES_MS__": str(round(1000 * figures_every_s(poll_s))), "__PARTS__": json.dumps(PARTS),
              "__PLOT_PARTS__": json.dumps(list(PLOT_PARTS)), "__PLOTLY_VERSION__": plotly_version(),
              "__PLOTLY_PATH__": plotly_path(), "__STATUS_ID__": STATUS_ID, "__RECOVERY_ID__": RECOVERY_ID,
              "__INJECT_ID__": INJECT_ID, "__LINE_CLASS__": LINE_CLASS, "__HOLDER_CLASS__": HOLDER_CLASS,
              "__WINDOW_ID__": WINDOW_ID,
              "__UNIT_ID__": UNIT_ID, "__JUMP_ID__": JUMP_ID, "__FAILURE_WINDOW__": FAILURE,
              "__WATCH_TAB_ID__": WATCH_TAB_ID, "__SHOW_WATCH_EVENT__": SHOW_WATCH_EVENT}
    for placeholder, value in values.items():
        script = script.replace(placeholder, value)
    return f"<script>\n{script}\n</script>"


def launch_options(poll_s: float, *, login_backoff: LoginBackoff | None = None) -> dict[str, Any]:
    """What every `demo.launch` of the dashboard passes (a fresh dict: Gradio adds to app_kwargs): the page's
    scripts; Gradio's upload route refuses (413) what the form would (its copy is never written); with a
    password, nothing but the login page before a login, and a back-off on guesses (login_guard.py)."""
    return {"head": page_head(poll_s), "css": PAGE_CSS, "max_file_size": UPLOAD_LIMIT_BYTES,
            "app_kwargs": {"middleware": [login_guard_middleware(login_backoff), early_script_middleware(),
                                          plotly_asset_middleware()]}, **_no_reachability_probe()}


def _no_reachability_probe() -> dict[str, Any]:
    """Gradio HEADs its own URL once before serving, with a 3-second timeout, and on a timeout (a busy
    machine) refuses to serve unless share=True, a public tunnel this app never opens. That probe only
    decides about the tunnel: skip it where this Gradio version lets us."""
    import gradio as gr

    return {"_frontend": False} if "_frontend" in inspect.signature(gr.Blocks.launch).parameters else {}


def line_html(markdown: str) -> str:
    """A status or recovery line (Markdown) as the HTML the script writes into the page."""
    return _MARKDOWN.render(markdown) if markdown else ""


def line_box(markdown: str = "") -> str:
    """A gr.HTML value: the line inside the element the script rewrites."""
    return f'<div class="{LINE_CLASS}">{line_html(markdown)}</div>'


def holder_box() -> str:
    """A gr.HTML value: the empty element the script draws a Watch part into."""
    return f'<div class="{HOLDER_CLASS}"></div>'


def status_box() -> str:
    """A gr.HTML value: the status JSON, folded; the script fills it in only while it is open."""
    return f'<details><summary>status (JSON)</summary><pre class="{HOLDER_CLASS}"></pre></details>'


def table_html(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, caption: str = "") -> str:
    """A table as the HTML the script writes into the page, every cell escaped."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows)
    title = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f'<table class="{TABLE_CLASS}">{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
