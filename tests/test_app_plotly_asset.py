"""plotly.js for the Watch tab, served by the dashboard's middleware: the plotly package's own copy
under a URL that names its version, gzip-compressed when the browser accepts it, cached for good,
and nothing else answered."""
from __future__ import annotations

import gzip

import pytest
from plotly.offline import get_plotlyjs
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from app.page.plotly_asset import PLOTLY_PREFIX, PlotlyAsset, plotly_path, plotly_version, response_for


def test_the_path_names_the_version_the_figures_were_written_for():
    assert plotly_path() == f"{PLOTLY_PREFIX}{plotly_version()}.min.js"
    assert f"plotly.js v{plotly_version()}" in get_plotlyjs()[:200]


@pytest.mark.parametrize("accept, compressed", [
    ("gzip, deflate, br", True), ("br;q=1.0, gzip;q=0.8", True), ("", False), ("deflate, br", False),
    ("x-gzip", False),
])
def test_the_script_is_compressed_only_for_a_browser_that_accepts_gzip(accept, compressed):
    status, headers, body = response_for(plotly_path(), [(b"accept-encoding", accept.encode())])
    named = dict(headers)
    assert status == 200 and named[b"content-type"].startswith(b"text/javascript")
    assert (named.get(b"content-encoding") == b"gzip") == compressed
    assert int(named[b"content-length"]) == len(body) and b"immutable" in named[b"cache-control"]
    assert (gzip.decompress(body) if compressed else body) == get_plotlyjs().encode()


@pytest.mark.parametrize("path", ["/", "/zerolock/plotly-0.0.1.min.js", "/gradio_api/run/watch_line",
                                  plotly_path() + ".map"])
def test_any_other_path_is_not_answered(path):
    assert response_for(path, []) is None


def test_the_middleware_answers_its_path_and_passes_everything_else_on():
    async def home(request):
        return PlainTextResponse("the app")

    client = TestClient(Starlette(routes=[Route("/", home, methods=["GET", "POST"])],
                                  middleware=[Middleware(PlotlyAsset)]))
    assert client.get("/").text == "the app" and client.post("/").text == "the app"
    script = client.get(plotly_path())  # the test client accepts gzip and decodes it
    assert script.headers["content-encoding"] == "gzip" and script.text == get_plotlyjs()
    head = client.head(plotly_path())
    assert head.status_code == 200 and head.content == b""
