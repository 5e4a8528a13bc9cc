"""The early script (frame_throttle.js): the middleware writes it right after the <head> of every plain
HTML page, and of nothing else; and in a real page an animation loop older than a second is slowed
while a fresh frame request still goes straight to the browser."""
from __future__ import annotations

import gzip
import re
import threading

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from app.page.early_script import LOOP_FRAME_MS, EarlyScript, early_script, with_early_script
from benchmarks.common.machine import free_port
from tests.test_app_browser import CHROMIUM_ARGS, chromium_or_skip

PAGE = "<!doctype html><html><head><title>t</title></head><body>x</body></html>"


@pytest.mark.parametrize("html, expected", [
    (b"<html><head><title>t</title></head></html>", b"<html><head>S<title>t</title></head></html>"),
    (b"<head></head><head></head>", b"<head>S</head><head></head>"),  # only the first
    (b"<html><body>no head</body></html>", b"<html><body>no head</body></html>"),
    (b"", b""),
])
def test_the_script_goes_right_after_the_first_head(html, expected):
    assert with_early_script(html, b"S") == expected


def test_the_early_script_has_every_placeholder_filled_in():
    script = early_script()
    assert script.startswith("<script>") and script.endswith("</script>")
    assert re.search(r"__[A-Z_]+__", script) is None and f"LOOP_FRAME_MS = {LOOP_FRAME_MS}" in script


def _client() -> TestClient:
    async def page(request):
        return HTMLResponse(PAGE)

    async def streamed(request):
        async def parts():
            yield PAGE[:20].encode()
            yield PAGE[20:].encode()
        return StreamingResponse(parts(), media_type="text/html")

    async def data(request):
        return JSONResponse({"html": PAGE})

    async def compressed(request):
        return Response(gzip.compress(PAGE.encode()), media_type="text/html", headers={"content-encoding": "gzip"})

    app = Starlette(routes=[Route("/", page, methods=["GET", "HEAD", "POST"]), Route("/streamed", streamed),
                            Route("/data", data), Route("/compressed", compressed)],
                    middleware=[Middleware(EarlyScript)])
    return TestClient(app)


@pytest.mark.parametrize("path", ["/", "/streamed"])
def test_an_html_page_gets_the_script_with_its_length_right(path):
    response = _client().get(path)
    assert response.status_code == 200
    assert response.text.startswith("<!doctype html><html><head><script>")
    assert response.text.endswith(PAGE[PAGE.index("<title>"):])
    assert int(response.headers["content-length"]) == len(response.content)


@pytest.mark.parametrize("method, path", [("GET", "/data"), ("POST", "/"), ("GET", "/compressed")])
def test_anything_but_a_plain_html_page_passes_untouched(method, path):
    response = _client().request(method, path)
    assert b"frame_throttle" not in response.content and "early_script" not in response.text
    if path == "/compressed":
        assert response.text == PAGE  # the client decompressed it: nothing was written into the gzip stream


FRAME_IDS = """async () => {
  const fresh = requestAnimationFrame(() => {});
  const ids = await new Promise((resolve) => {
    const seen = []; const t0 = performance.now();
    const step = () => {
      const id = requestAnimationFrame(step);
      seen.push([performance.now() - t0, id]);
      if (performance.now() - t0 > 1600) { cancelAnimationFrame(id); resolve(seen); }
    };
    requestAnimationFrame(step);
  });
  return {fresh, ids};
}"""


@pytest.mark.slow
def test_in_the_page_an_old_animation_loop_is_slowed_and_a_fresh_frame_is_not(tmp_path):
    from playwright.sync_api import sync_playwright

    chromium = chromium_or_skip()
    port = free_port()
    app = Starlette(routes=[Route("/", lambda request: HTMLResponse(PAGE))], middleware=[Middleware(EarlyScript)])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/", timeout=60_000)
            got = page.evaluate(FRAME_IDS)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(30)
    assert got["fresh"] > 0  # straight to the browser
    young = [i for t, i in got["ids"] if t < 900]
    old = [i for t, i in got["ids"] if t > 1100]
    assert young and all(i > 0 for i in young)  # a loop's first second runs at the browser's rate
    assert old and all(i < 0 for i in old)  # after that its frames are postponed
    assert len(old) <= 500 / LOOP_FRAME_MS + 2  # about one frame per LOOP_FRAME_MS in the last ~500 ms
