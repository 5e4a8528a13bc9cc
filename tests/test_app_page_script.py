"""The page's own script: its poll interval comes from --poll, the figures' cadence from the same
definition, and the lines it writes into the page are the status Markdown rendered with any raw HTML
escaped."""
from __future__ import annotations

import re

import pytest

from app.page.page_script import LINE_CLASS, line_box, line_html, page_head


@pytest.mark.parametrize("poll_s, interval", [
    (1.0, "const POLL_MS = 1000, FIGURES_MS = 5000;"),
    (0.5, "const POLL_MS = 500, FIGURES_MS = 5000;"),
    (2.25, "const POLL_MS = 2250, FIGURES_MS = 5000;"),
    (7.5, "const POLL_MS = 7500, FIGURES_MS = 7500;"),  # the figures never more often than the line
])
def test_the_script_polls_at_the_dashboards_poll_interval_and_draws_at_most_every_figures_interval(poll_s, interval):
    head = page_head(poll_s)
    assert head.startswith("<script>") and head.rstrip().endswith("</script>")
    assert interval in head and re.search(r"__[A-Z_]+__", head) is None  # every placeholder filled in


@pytest.mark.parametrize("poll_s", [0.1, 0.0, float("nan")])
def test_a_poll_under_half_a_second_is_refused(poll_s):
    with pytest.raises(ValueError, match="--poll must be at least"):
        page_head(poll_s)


@pytest.mark.parametrize("markdown, html", [
    ("", ""),
    ("**ZeroLock** · running", "<p><strong>ZeroLock</strong> · running</p>\n"),
    ("a  \n`runs/x`", "<p>a<br />\n<code>runs/x</code></p>\n"),
    ("**Error:** `<script>alert(1)</script>`", "<p><strong>Error:</strong> <code>&lt;script&gt;alert(1)&lt;/script&gt;</code></p>\n"),
    ("<img src=x onerror=alert(1)>", "<p>&lt;img src=x onerror=alert(1)&gt;</p>\n"),
])
def test_a_line_is_its_markdown_rendered_with_raw_html_escaped(markdown, html):
    assert line_html(markdown) == html


def test_a_line_box_holds_the_line_in_the_element_the_script_rewrites():
    assert line_box("x") == f'<div class="{LINE_CLASS}"><p>x</p>\n</div>'


def test_the_dashboard_serves_when_gradios_own_reachability_probe_times_out(tmp_path, monkeypatch):
    """On a busy machine Gradio's one 3-second HEAD of its own URL can time out; Gradio would then refuse
    to serve without a public share link. The probe is what the machine's load decides, so it is made
    to fail here, and the dashboard must still serve its page."""
    import gradio.networking
    import httpx

    from app.ui import build_app
    from benchmarks.common.machine import free_port

    monkeypatch.setattr(gradio.networking, "url_ok", lambda url: False)
    demo = build_app(runs_root=tmp_path)
    port = free_port()
    try:
        demo.launch(**demo.page_options(), prevent_thread_lock=True, server_name="127.0.0.1", server_port=port,
                    quiet=True)
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=60).status_code == 200
    finally:
        demo.controller.close()
        demo.close()
