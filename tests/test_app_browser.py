"""Browser tier: Playwright drives Debian's Chromium against the dashboard launched in-process.

Screenshots go to pytest's tmp dir and are copied to test-artifacts/ at the repository root.
Skips only where /usr/bin/chromium is absent outside CI; under CI (CI set) a missing Chromium fails."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from app.page.page_script import RUNS_TABLE_ID as RUNS_TABLE
from app.ui import build_app
from benchmarks.common.machine import free_port

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


@pytest.fixture
def page(tmp_path):
    chromium = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    demo = build_app(runs_root=tmp_path / "runs")
    port = free_port()
    demo.launch(**demo.page_options(), prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
            pg = browser.new_page(viewport={"width": 1400, "height": 1000})
            pg.goto(f"http://127.0.0.1:{port}/")
            pg.wait_for_selector("#lesson-narration >> text=The bubble")  # the dashboard opens on the Lessons
            pg.click("#tab-run-button")  # the tests below start from the Run form
            pg.wait_for_selector("#run-button")
            yield pg
            browser.close()
    finally:
        demo.controller.close()
        demo.close()


# resolves after the browser has painted twice: what the page just drew is on screen
NEXT_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


def shot(page, tmp_path: Path, name: str) -> None:
    """The whole page, every part of it drawn: the Watch tab draws only what is on screen, so the
    window is made as tall as the page for a moment (and gets a tick to draw what came into view)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    path = tmp_path / f"{name}.png"
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": page.evaluate("document.body.scrollHeight")})
    if page.locator("#watch-status:visible").count():
        try:  # the next figures tick, asked for what the taller window shows
            with page.expect_response(lambda r: r.url.endswith("/watch_figures"), timeout=30_000):
                pass
        except PlaywrightTimeout:
            pass  # an ended run's view asks for nothing more: what is drawn is all there is
    page.wait_for_function(NEXT_FRAMES)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(size)
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
    # what is off screen is not asked for (the table, under the figures), until it comes into view
    asked: list[list[str]] = []
    page.on("request", lambda r: asked.append(json.loads(r.post_data)["data"][3])
            if r.url.endswith("/watch_figures") else None)
    with page.expect_request(lambda r: r.url.endswith("/watch_figures"), timeout=60_000):
        pass  # a figures tick at least
    assert asked and not any("table" in parts for parts in asked), asked
    # once in view it is asked for (awaited: a table drawn before it went off screen, while the figures
    # above it were still empty, may already show steps done, so the drawn table proves nothing alone)
    with page.expect_request(lambda r: r.url.endswith("/watch_figures")
                             and "table" in json.loads(r.post_data)["data"][3], timeout=60_000):
        page.locator("#stage-table").scroll_into_view_if_needed()
    page.wait_for_function("() => [...document.querySelectorAll('#stage-table td:nth-child(3)')]"
                           ".some(td => Number(td.textContent) > 0)", timeout=30_000)  # steps done, drawn
    page.evaluate("window.scrollTo(0, 0)")
    # a zoom of the user's own (a box drawn on the timeline) survives the redraws that follow
    zoomed = drag_zoom(page, "#timeline")
    title = page.evaluate(TIMELINE_TITLE)
    page.wait_for_function(f"() => ({TIMELINE_TITLE})() !== {json.dumps(title)}", timeout=30_000)  # redrawn
    assert page.evaluate(X_RANGE, "#timeline") == pytest.approx(zoomed)
    page.dblclick("#timeline .nsewdrag")  # back to the live window
    shot(page, tmp_path, "browser-2-watch-live")
    page.click("#tab-run-button")
    page.click("#stop-button")
    page.click("#tab-watch-button")
    page.wait_for_selector("#watch-status >> text=stopped", timeout=120_000)
    assert "step 400 / 400" not in page.inner_text("#watch-status")
    shot(page, tmp_path, "browser-3-stopped")


# JS: how many kill markers a plot has drawn (the timeline of single bars and the per-step view alike)
KILL_MARKERS = """sel => {
  const gd = document.querySelector(sel + ' .js-plotly-plot');
  return gd && gd._fullData ? gd._fullData.filter(t => t.legendgroup === 'failure')
                                          .reduce((n, t) => n + (t.x || []).length, 0) : 0;
}"""
TIMELINE_TITLE = "() => document.querySelector('#timeline .js-plotly-plot').layout.title.text"
X_RANGE = "sel => document.querySelector(sel + ' .js-plotly-plot')._fullLayout.xaxis.range.map(Number)"


def drag_zoom(page, sel: str) -> list[float]:
    """Draw a zoom box over the middle third of a plot's x axis, as a user would; the new x range."""
    before = page.evaluate(X_RANGE, sel)
    box = page.locator(f"{sel} .nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] / 3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2, y + 1, steps=5)
    page.mouse.move(box["x"] + 2 * box["width"] / 3, y + 1, steps=5)
    page.mouse.up()
    after = page.evaluate(X_RANGE, sel)
    # (the live window may have moved on between the two readings: only that the zoom took)
    assert after != before and not page.evaluate(f"() => document.querySelector('{sel} .js-plotly-plot')"
                                                 "._fullLayout.xaxis.autorange"), (before, after)
    return after


# JS: the timeline's visible x range, its failure markers and its REPLAY bars, from plotly's own data
FAILURE_VIEW = """sel => {
  const gd = document.querySelector(sel + ' .js-plotly-plot');
  if (!gd || !gd._fullLayout || !gd._fullData) return null;
  const out = {range: gd._fullLayout.xaxis.range.map(Number), kills: [], replays: []};
  for (const t of gd._fullData) {
    if (t.legendgroup === 'failure') t.x.forEach((x, i) => out.kills.push([Number(x), t.y[i]]));
    if (t.legendgroup === 'REPLAY' && t.type === 'bar')
      t.base.forEach((b, i) => out.replays.push([Number(b), Number(b) + Number(t.x[i]), t.y[i]]));
    // past WEBGL_THRESHOLD bars (a slow recovery on a busy machine) REPLAY is one segment per bar
    if (t.legendgroup === 'REPLAY' && t.type === 'scattergl')
      for (let i = 0; i + 1 < t.x.length; i += 3) out.replays.push([Number(t.x[i]), Number(t.x[i + 1]), t.y[i]]);
  }
  return out;
}"""


def wait_for_redraw(page, sel: str, timeout_ms: int = 120_000) -> None:
    """Wait on the page's state, not the clock: until the plot in `sel` has been drawn again (Plotly.react
    gives the same plot div a new `_fullData` array on every draw)."""
    page.evaluate("sel => { window.__zlDrawnBefore = document.querySelector(sel + ' .js-plotly-plot')._fullData; }", sel)
    page.wait_for_function("sel => { const gd = document.querySelector(sel + ' .js-plotly-plot'); "
                           "return gd && gd._fullData && gd._fullData !== window.__zlDrawnBefore; }",
                           arg=sel, timeout=timeout_ms)


def inside(view, x0, x1) -> bool:
    lo, hi = view["range"]
    return lo <= x0 and x1 <= hi


@pytest.mark.slow
def test_a_scheduled_failure_is_pinned_in_view_then_an_injected_one_too(page, tmp_path):
    """Schedule stage 1's kill after step 21 from the Run form and never touch the view: the timeline
    pins itself to the failure, with the kill marker and stage 1's REPLAY inside the visible window.
    Then kill stage 0 from the Inject panel: the view moves to that failure."""
    page.get_by_label("stages K").fill("3")
    page.get_by_label("steps", exact=True).fill("600")
    page.locator("#schedule-failure-mode input").click()
    page.get_by_role("option", name="kill (SIGKILL)").click()
    page.locator("#schedule-failure-stage input").fill("1")
    page.locator("#schedule-failure-step input").fill("21")  # mid-window: micro-batches to replay
    page.get_by_text("more", exact=True).click()
    page.get_by_label("sequence length").fill("32")
    page.get_by_label("eval examples (0 = all 1000)").fill("8")
    shot(page, tmp_path, "browser-5-scheduled-failure-form")
    page.click("#run-button")
    page.wait_for_selector("#watch-status >> text=ZeroLock", timeout=30_000)
    # nothing touched from here on: the view must move to the failure by itself
    page.wait_for_function(f"() => {{ const v = ({FAILURE_VIEW})('#timeline'); return v && v.kills.length > 0 "
                           "&& v.replays.some(r => r[2] === 1); }", timeout=300_000)
    page.wait_for_selector("#recovery-line >> text=local recovery", timeout=120_000)
    wait_for_redraw(page, "#timeline")  # the next redraw, with the recovery closed
    view = page.evaluate(FAILURE_VIEW, "#timeline")
    assert page.locator("#watch-window input[value='around the last failure']").is_checked()
    assert [stage for _, stage in view["kills"]] == [1], view
    assert all(inside(view, x, x) for x, _ in view["kills"]), view
    replays = [r for r in view["replays"] if r[2] == 1]
    assert replays and all(inside(view, a, b) for a, b, _ in replays), view
    assert {r[2] for r in view["replays"]} == {1}  # ZeroLock: only the failed stage replays
    shot(page, tmp_path, "browser-6-scheduled-failure-pinned")
    # a second failure, from the Inject panel: the view follows it
    page.locator("#failure-panel").get_by_text("Inject failure").first.click()
    # the panel's opening redraws the stage field's hint: type once that has landed
    page.wait_for_selector("#failure-stage >> text=stage (K = 3: stages 0..2)", timeout=60_000)
    page.locator("#failure-stage input").fill("0")
    page.locator("#failure-mode input").click()
    page.get_by_role("option", name="kill (SIGKILL)").click()
    assert page.locator("#failure-stage input").input_value() == "0"  # nothing redrew the field since
    # the open panel is one short row: the timeline below still starts on a 720-pixel screen
    panel = page.locator("#failure-panel").bounding_box()
    assert panel["height"] <= 200, panel
    page.click("#inject-failure")
    page.wait_for_selector("#failure-result >> text=Injected", timeout=30_000)
    page.wait_for_function(f"() => {{ const v = ({FAILURE_VIEW})('#timeline'); "
                           "return v && v.kills.some(k => k[1] === 0); }", timeout=120_000)
    page.wait_for_function("() => (document.querySelector('#recovery-line').innerText.match(/local recovery/g) "
                           "|| []).length === 2", timeout=120_000)
    line = page.inner_text("#recovery-line")
    assert "stage 1 kill" in line and "stage 0 kill" in line and "replay" in line, line
    wait_for_redraw(page, "#timeline")
    view = page.evaluate(FAILURE_VIEW, "#timeline")
    assert any(stage == 0 and inside(view, x, x) for x, stage in view["kills"]), view
    shot(page, tmp_path, "browser-7-second-failure-pinned")
    page.click("#tab-run-button")
    page.click("#stop-button")  # no need to train the remaining steps
    page.click("#tab-watch-button")
    page.wait_for_selector("#watch-status >> text=stopped", timeout=120_000)
    # reopened from the Runs tab: the whole run, both failures on it, and the recovery line back
    name = page.inner_text("#watch-status").split("run folder")[-1].strip()  # the run's name in the runs folder
    page.click("#tab-runs-button")  # the newest run comes picked
    page.wait_for_function(f"() => document.querySelector('#runs-pick input').value === {json.dumps(name)}",
                           timeout=30_000)
    page.click("#runs-open")
    page.wait_for_selector("#watch-window input[value='whole run']:checked", timeout=30_000)
    # the whole run, drawn afresh from every event: the slowest draw of the test (a busy 2-core box took over 60 s)
    page.wait_for_function(f"() => ({KILL_MARKERS})('#timeline') === 2 && /whole run/.test(({TIMELINE_TITLE})())",
                           timeout=180_000)
    line = page.inner_text("#recovery-line")
    assert "stage 1 kill" in line and "stage 0 kill" in line, line
    shot(page, tmp_path, "browser-8-reopened-whole-run")


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


@pytest.mark.slow
def test_explain_draws_zb_h1_with_its_weight_gradients_on_every_stage(page, tmp_path):
    page.set_viewport_size({"width": 1280, "height": 720})
    page.click("#tab-explain-button")
    page.wait_for_selector("#explain-text >> text=update locking")
    page.locator("#explain-bp").get_by_text("ZB-H1").click()
    page.wait_for_selector("#explain-text >> text=W = 10 ms", timeout=30_000)
    page.wait_for_function(f"() => Object.keys(({KIND_BARS})(['#explain-timeline', 'W'])).length === 3",
                           timeout=30_000)
    # K = 3, m = 4: four W bars on each stage's lane of the ZB-H1 timeline
    assert set(page.evaluate(KIND_BARS, ["#explain-timeline", "W"]).values()) == {4}
    shot(page, tmp_path, "browser-4b-explain-zb-h1")


@pytest.mark.slow
def test_explain_draws_dualpipe_v_on_devices_each_running_two_chunks(page, tmp_path):
    page.set_viewport_size({"width": 1280, "height": 720})
    page.click("#tab-explain-button")
    page.wait_for_selector("#explain-text >> text=update locking")
    page.get_by_label("micro-batches m").last.fill("6")
    page.get_by_label("micro-batches m").last.press("Enter")
    page.wait_for_selector("#explain-text >> text=m = 6", timeout=30_000)
    page.locator("#explain-bp").get_by_text("DualPipe-V").click()
    page.wait_for_selector("#explain-text >> text=into 6 chunks", timeout=30_000)
    # K = 3 devices, m = 6: each device's lane runs the W of its two chunks, 12 a lane (ZeroLock has none)
    page.wait_for_function(f"() => Object.keys(({KIND_BARS})(['#explain-timeline', 'W'])).length === 3",
                           timeout=30_000)
    assert page.evaluate(KIND_BARS, ["#explain-timeline", "W"]) == {"0": 12, "1": 12, "2": 12}
    assert "device 0" in page.inner_text("#explain-timeline")
    shot(page, tmp_path, "browser-4c-explain-dualpipe-v")


# JS: the outlines a lesson draws on the figure inside `sel` (shapes and annotations named lesson-highlight)
HIGHLIGHTS = """sel => {
  const gd = document.querySelector(sel + ' .js-plotly-plot');
  if (!gd || !gd.layout) return -1;
  const named = xs => (xs || []).filter(x => x.name === 'lesson-highlight').length;
  return named(gd.layout.shapes) + named(gd.layout.annotations);
}"""


@pytest.mark.slow
def test_every_lesson_step_replays_its_recording_outlined_in_presenter_view_then_runs_live(page, tmp_path):
    from app.lessons import LESSONS

    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(page.url.split("?")[0] + "?presenter=1")  # opens on the Lessons' first step
    page.wait_for_function("() => document.body.classList.contains('zl-presenter')", timeout=30_000)
    for i, item in enumerate(LESSONS, start=1):
        if i > 1:
            page.click("#lesson-next")  # presenter view steps through with previous / next
        page.wait_for_selector(f"#lesson-narration >> text={item.title}", timeout=30_000)
        page.wait_for_function(f"() => ({HIGHLIGHTS})('#lesson-figure') > 0", timeout=30_000)
        ARTIFACTS.mkdir(exist_ok=True)  # as a room sees it: one 1280x720 screen
        page.screenshot(path=str(ARTIFACTS / f"browser-lesson-{i}-presenter-1280x720.png"))
    # the advanced details are hidden in presenter view
    assert not page.locator("#status-json").is_visible()
    # "Run it live" makes the first step's runs again and switches to Watch live
    for item in reversed(LESSONS[:-1]):  # one step back at a time: each click moves from the step shown
        page.click("#lesson-previous")
        page.wait_for_selector(f"#lesson-narration >> text={item.title}", timeout=30_000)
    page.click("#lesson-live")
    page.wait_for_selector("#lesson-message >> text=Started 3 run(s)", state="attached", timeout=60_000)
    page.wait_for_function("() => document.querySelector('#tab-watch-button').getAttribute('aria-selected') === 'true'",
                           timeout=30_000)
    page.click("#tab-run-button")
    page.click("#stop-button")


@pytest.mark.slow
def test_an_uploaded_jsonl_is_previewed_trained_exported_and_tried(page, tmp_path):
    """Your own data, as a student does it: upload a JSONL in the Run form, see its first rows with the answer's
    tokens outlined, train 5 steps, export the PEFT adapter from the Runs tab and try a prompt."""
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"q": f"What is {i % 7} plus {i % 5}?", "a": f"It is {i % 7 + i % 5}."}) + "\n"
                            for i in range(40)))
    page.set_viewport_size({"width": 1280, "height": 720})
    page.click("#tab-run-button")
    page.get_by_text("data: built in, or your own file").click()
    page.get_by_label("prompt → response").check()  # the fields first: the upload is checked as their task
    page.locator("#data-prompt-field textarea").fill("q")
    page.locator("#data-response-field textarea").fill("a")
    page.locator("#data-upload input[type=file]").set_input_files(str(data))
    page.wait_for_selector("#data-preview >> text=Uploaded", timeout=60_000)
    assert page.locator("#data-choice input").input_value() == "qa.jsonl"
    page.click("#data-preview-button")
    page.wait_for_selector("#data-preview >> text=as the model sees them", timeout=60_000)
    outlined = page.evaluate("() => [...document.querySelectorAll('#data-preview span')]"
                             ".filter(s => s.style.outline.includes('solid')).map(s => s.textContent)")
    assert "".join(outlined[1:5]).startswith(" It is"), outlined  # [0]: the legend's own "outlined"
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#data-preview").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "browser-own-data-preview-1280x720.png"))
    page.get_by_label("steps", exact=True).fill("5")
    page.click("#run-button")
    page.wait_for_selector("#run-message >> text=Started 1 run", state="attached", timeout=60_000)
    page.click("#tab-watch-button")  # the run just started is the watched one: its status says when it ends
    page.wait_for_selector("#watch-status >> text=finished", timeout=240_000)
    page.click("#tab-runs-button")
    # the Runs tab lists the run, finished (the table is redrawn from the runs folder on Refresh)
    page.get_by_role("button", name="Refresh").click()
    page.wait_for_function("id => document.getElementById(id).innerText.includes('finished')", arg=RUNS_TABLE,
                           timeout=60_000)
    # the run picker holds the newest run (the only one)
    page.wait_for_function("() => document.querySelector('#runs-pick input').value !== ''", timeout=30_000)
    page.get_by_label("PEFT adapter (zip)").check()
    page.click("#runs-export")
    page.wait_for_selector("#runs-message >> text=peft-adapter.zip", state="attached", timeout=120_000)
    page.locator("#try-prompts textarea").fill("What is 1 plus 1?")
    page.click("#try-it")
    page.wait_for_selector("#try-message >> text=answers changed", state="attached", timeout=120_000)
    assert "What is 1 plus 1?" in page.inner_text("#try-table")
    page.locator("#try-table").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "browser-own-data-try-it-1280x720.png"))
