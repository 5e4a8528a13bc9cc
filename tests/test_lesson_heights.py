"""Browser tier: every lesson step fits one 1280x720 screen in presenter view, at 100 % and at 150 % zoom
(1280x720 CSS px; 853x480 CSS px at a device scale of 1.5), and in normal view at 100 % its point — the
headline beside the figure, and the figure — is above the fold. The dashboard opens on the Lessons: the
first step is measured as the page opens, no tab clicked.

Every wait is on the page's state (the step's title, the figure drawn again at the size its box has), never
on the clock. Screenshots go to test-artifacts/."""
from __future__ import annotations

import pytest

from app.lessons import LESSONS
from app.ui import build_app
from benchmarks.common.machine import free_port
from tests.test_app_browser import ARTIFACTS, CHROMIUM_ARGS, chromium_or_skip

SCREEN = (1280, 720)
MIN_FIGURE_PX = 220  # a figure squeezed flat does not count as fitting
WAIT_MS = 60_000

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]

# JS: the lesson's plot, once plotly has drawn it at the height its box gives it (the page sizes the box in
# presenter view; a draw before the page's class was set would not match it, and is not the last one)
DRAWN = """([title, before]) => {
  const text = document.querySelector('#lesson-narration');
  const gd = document.querySelector('#lesson-figure .js-plotly-plot');
  if (!text || !text.innerText.includes(title) || !gd || !gd._fullLayout || gd._fullData === window[before]) return false;
  return Math.abs(gd._fullLayout.height - gd.clientHeight) <= 1;
}"""
# JS: where the step's parts end, in CSS px from the top of the page, and the screen's height
BOTTOMS = """() => {
  const bottom = sel => { const e = document.querySelector(sel); return e ? e.getBoundingClientRect().bottom + scrollY : null; };
  return {figure: bottom('#lesson-figure'), text: bottom('#lesson-text'), point: bottom('#lesson-narration'),
          plot: document.querySelector('#lesson-figure .js-plotly-plot').clientHeight, screen: innerHeight,
          lessons: document.querySelector('#tab-lessons-button').getAttribute('aria-selected')};
}"""


@pytest.fixture(scope="module")
def url():
    chromium_or_skip()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="zerolock-lesson-heights-") as runs:
        demo = build_app(runs_root=runs)
        port = free_port()
        demo.launch(**demo.page_options(), prevent_thread_lock=True, server_name="127.0.0.1", server_port=port,
                    quiet=True)
        try:
            yield f"http://127.0.0.1:{port}/"
        finally:
            demo.controller.close()
            demo.close()


def measured_steps(url: str, *, zoom: float, presenter: bool, shots: str) -> list[tuple]:
    """(lesson, what BOTTOMS measured) for every step, walked with "next ▶" as a presenter does; each step's
    screenshot saved as `shots` with its number."""
    from playwright.sync_api import sync_playwright

    out = []
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium_or_skip()), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": round(SCREEN[0] / zoom), "height": round(SCREEN[1] / zoom)},
                                    device_scale_factor=zoom)
            page.goto(url + ("?presenter=1" if presenter else ""))
            for n, item in enumerate(LESSONS, start=1):
                if n > 1:
                    page.evaluate("() => { const gd = document.querySelector('#lesson-figure .js-plotly-plot'); "
                                  "window.__zlBefore = gd && gd._fullData; }")
                    page.click("#lesson-next")
                page.wait_for_function(DRAWN, arg=[item.title, "__zlBefore" if n > 1 else "__zlNone"], timeout=WAIT_MS)
                out.append((item, page.evaluate(BOTTOMS)))
                page.screenshot(path=str(ARTIFACTS / shots.format(n=n)))
        finally:
            browser.close()
    return out


@pytest.mark.parametrize("zoom", [1.0, 1.5], ids=["100%", "150%"])
def test_every_lesson_step_fits_the_screen_in_presenter_view(url, zoom):
    steps = measured_steps(url, zoom=zoom, presenter=True,
                           shots=f"lesson-{{n}}-presenter-1280x720-at-{round(100 * zoom)}.png")
    for item, got in steps:
        assert got["lessons"] == "true", "the dashboard opens on the Lessons"
        assert max(got["figure"], got["text"]) <= got["screen"], (item.key, zoom, got)
        assert got["plot"] >= MIN_FIGURE_PX, (item.key, zoom, got)


def test_every_lesson_steps_point_is_above_the_fold_in_normal_view(url):
    for item, got in measured_steps(url, zoom=1.0, presenter=False, shots="lesson-{n}-1280x720.png"):
        assert got["lessons"] == "true", "the dashboard opens on the Lessons"
        assert max(got["figure"], got["point"]) <= got["screen"], (item.key, got)
