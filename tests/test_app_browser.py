"""Browser tier: Playwright drives Debian's Chromium against the dashboard launched in-process.

Screenshots go to pytest's tmp dir and are copied to test-artifacts/ at the repository root.
Skips only where /usr/bin/chromium is absent outside CI; under CI (CI set) a missing Chromium fails."""
from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest

from app.ui import build_app

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"

pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]

# JS: bars drawn per stage lane in the plotly figure inside `sel` ({} until the figure has data)
BARS_PER_STAGE = """sel => {
  const gd = document.querySelector(sel + ' .js-plotly-plot');
  const out = {};
  if (!gd || !gd._fullData) return out;
  for (const t of gd._fullData) {  // plotly.js's decoded traces (numpy arrays arrive base64-encoded)
    if (t.type !== 'bar' && t.type !== 'scattergl') continue;
    for (const y of (t.y || [])) if (y !== null) out[y] = (out[y] || 0) + 1;
  }
  return out;
}"""

# JS: bars of one action kind per stage lane (the timeline's traces are grouped by kind)
KIND_BARS = """([sel, kind]) => {
  const gd = document.querySelector(sel + ' .js-plotly-plot');
  const out = {};
  if (!gd || !gd._fullData) return out;
  for (const t of gd._fullData) {
    if (t.legendgroup !== kind) continue;
    for (const y of (t.y || [])) if (y !== null) out[y] = (out[y] || 0) + 1;
  }
  return out;
}"""


def chromium_or_skip() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail("CI is set but /usr/bin/chromium is missing: scripts/setup.sh should have installed it")
    pytest.skip("Debian's chromium is not installed (apt-get install chromium); browser tier skipped")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def page(tmp_path):
    chromium = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    demo = build_app(runs_root=tmp_path / "runs")
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
            pg = browser.new_page(viewport={"width": 1400, "height": 1000})
            pg.goto(f"http://127.0.0.1:{port}/")
            pg.wait_for_selector("#run-button")
            yield pg
            browser.close()
    finally:
        demo.controller.close()
        demo.close()


def shot(page, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(path, ARTIFACTS / path.name)


def test_missing_chromium_skips_outside_ci_and_fails_under_ci(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", Path("/nonexistent/chromium"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        chromium_or_skip()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        chromium_or_skip()


@pytest.mark.slow
def test_run_shows_bars_for_every_stage_then_stop(page, tmp_path):
    page.get_by_label("stages K").fill("3")
    page.get_by_label("steps", exact=True).fill("400")  # long enough to be stopped while it runs
    page.get_by_text("more", exact=True).click()
    page.get_by_label("sequence length").fill("32")
    page.get_by_label("eval examples (0 = all 1000)").fill("8")
    shot(page, tmp_path, "browser-1-run-form")
    page.click("#run-button")
    page.wait_for_selector("#watch-status >> text=ZeroLock", timeout=30_000)  # switched to Watch live
    page.wait_for_function(f"() => Object.keys(({BARS_PER_STAGE})('#timeline')).length === 3", timeout=240_000)
    bars = page.evaluate(BARS_PER_STAGE, "#timeline")
    assert set(bars) == {"0", "1", "2"} and all(n > 0 for n in bars.values()), bars
    assert page.locator("#timeline .barlayer .point").count() > 0  # really drawn as SVG bars
    memory = page.evaluate(BARS_PER_STAGE, "#memory")
    assert set(memory) == {"0", "1", "2"}  # one peak bar per stage
    shot(page, tmp_path, "browser-2-watch-live")
    page.click("#tab-run-button")
    page.click("#stop-button")
    page.click("#tab-watch-button")
    page.wait_for_selector("#watch-status >> text=stopped", timeout=120_000)
    assert "step 400 / 400" not in page.inner_text("#watch-status")
    time.sleep(1)  # let the last redraw settle before the screenshot
    shot(page, tmp_path, "browser-3-stopped")


@pytest.mark.slow
def test_inject_failure_shows_restore_and_replay_then_the_run_finishes(page, tmp_path):
    page.get_by_label("stages K").fill("3")
    page.get_by_label("steps", exact=True).fill("150")  # long enough to inject into under any load
    page.get_by_text("more", exact=True).click()
    page.get_by_label("sequence length").fill("32")
    page.get_by_label("eval examples (0 = all 1000)").fill("8")
    page.click("#run-button")
    page.wait_for_selector("#watch-status >> text=ZeroLock", timeout=30_000)
    page.get_by_label("whole run").check()  # the replay must stay in view however long the run goes on
    page.wait_for_function(f"() => Object.keys(({BARS_PER_STAGE})('#timeline')).length === 3", timeout=240_000)
    page.locator("#failure-panel").get_by_text("Inject failure").first.click()  # open the panel
    page.locator("#failure-stage input").fill("1")
    page.get_by_label("kill (SIGKILL)").check()
    page.click("#inject-failure")
    page.wait_for_selector("#failure-result >> text=Injected", timeout=30_000)
    # the killed stage's lane shows its restore and its replay; the status line reports the times
    page.wait_for_function(f"() => ({KIND_BARS})(['#timeline', 'REPLAY'])['1'] > 0", timeout=240_000)
    page.wait_for_function(f"() => ({KIND_BARS})(['#timeline', 'RESTORE'])['1'] > 0", timeout=30_000)
    page.wait_for_selector("#recovery-line >> text=local recovery: detect", timeout=60_000)
    replay = page.evaluate(KIND_BARS, ["#timeline", "REPLAY"])
    assert set(replay) == {"1"}, replay  # ZeroLock: only the failed stage replays
    shot(page, tmp_path, "browser-5-recovered")
    page.wait_for_selector("#watch-status >> text=finished", timeout=300_000)
    assert "restore" in page.inner_text("#recovery-line") and "replay" in page.inner_text("#recovery-line")
    time.sleep(1)
    shot(page, tmp_path, "browser-6-finished-after-recovery")


@pytest.mark.slow
def test_explain_redraws_for_k_and_m(page, tmp_path):
    page.click("#tab-explain-button")
    page.wait_for_selector("#explain-text >> text=update locking")
    page.get_by_label("stages K").last.fill("5")
    page.get_by_label("stages K").last.press("Enter")
    page.wait_for_selector("#explain-text >> text=K = 5", timeout=30_000)
    # the peak-memory panel: one bar per stage for each of the two methods
    page.wait_for_function(f"() => Object.keys(({BARS_PER_STAGE})('#explain-memory')).length === 5",
                           timeout=30_000)
    assert set(page.evaluate(BARS_PER_STAGE, "#explain-memory").values()) == {2}
    shot(page, tmp_path, "browser-4-explain")
