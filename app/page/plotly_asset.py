"""plotly.js for the Watch tab's live figures, served by the dashboard itself (an ASGI middleware).

The page's script draws the Watch figures with `Plotly.react` into plot divs it keeps (page_script.js),
so it needs plotly.js outside Gradio's own plot component. It takes the copy that ships with the
plotly Python package (`plotly.offline.get_plotlyjs()`): the same version that wrote the figures'
JSON, offline, and loaded by the page only when it first draws a Watch figure. The URL names the
version, so the browser may keep it for good; it is sent gzip-compressed to a browser that accepts
that (4.8 MB -> ~1.4 MB, for a classroom's laptops on Wi-Fi)."""
from __future__ import annotations

import functools
import gzip
from typing import Any, Awaitable, Callable

from starlette.middleware import Middleware

PLOTLY_PREFIX = "/zerolock/plotly-"

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@functools.cache
def plotly_version() -> str:
    from plotly.offline import get_plotlyjs_version

    return get_plotlyjs_version()


def plotly_path() -> str:
    """The script's URL path, absolute from the app's root (the page asks for it relative to itself)."""
    return f"{PLOTLY_PREFIX}{plotly_version()}.min.js"


@functools.cache
def _bodies() -> tuple[bytes, bytes]:
    """(plain, gzip) bytes of plotly.min.js: read and compressed once, on the first request."""
    from plotly.offline import get_plotlyjs

    plain = get_plotlyjs().encode()
    return plain, gzip.compress(plain, compresslevel=6, mtime=0)


def _accepts_gzip(headers: list[tuple[bytes, bytes]]) -> bool:
    accepted = b",".join(v for k, v in headers if k.lower() == b"accept-encoding")
    return any(token.split(b";")[0].strip() == b"gzip" for token in accepted.split(b","))


def response_for(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
    """The response to GET `path` (status, headers, body), or None when `path` is not plotly.js's."""
    if not path.endswith(plotly_path()):  # behind a proxy the app may live under a prefix
        return None
    plain, packed = _bodies()
    compressed = _accepts_gzip(headers)
    body = packed if compressed else plain
    out = [(b"content-type", b"text/javascript; charset=utf-8"), (b"content-length", str(len(body)).encode()),
           (b"cache-control", b"public, max-age=31536000, immutable"), (b"vary", b"accept-encoding")]
    if compressed:
        out.append((b"content-encoding", b"gzip"))
    return 200, out, body


class PlotlyAsset:
    """Answers GET PLOTLY_PREFIX<version>.min.js; everything else goes on to the app."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = None
        if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD"):
            answer = response_for(scope.get("path", ""), scope.get("headers", []))
        if answer is None:
            await self.app(scope, receive, send)
            return
        status, headers, body = answer
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})


def plotly_asset_middleware() -> Middleware:
    return Middleware(PlotlyAsset)
