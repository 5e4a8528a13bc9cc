"""A script the dashboard's index page runs before anything of Gradio's (frame_throttle.js): an ASGI
middleware writes it right after the page's `<head>`. Gradio's own `head=` option is added by its
front end once the app's config has loaded, too late for what this script must wrap."""
from __future__ import annotations

from importlib import resources
from typing import Any, Awaitable, Callable

from starlette.middleware import Middleware

LOOP_FRAME_MS = 250  # an animation loop older than a second: at most 4 frames a second
HEAD = b"<head>"

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def early_script() -> str:
    script = resources.files(__package__).joinpath("frame_throttle.js").read_text(encoding="utf-8")
    return "<script>\n" + script.replace("__LOOP_FRAME_MS__", str(LOOP_FRAME_MS)) + "</script>"


def with_early_script(html: bytes, script: bytes) -> bytes:
    """`html` with `script` right after its first <head> (unchanged if it has none)."""
    at = html.find(HEAD)
    if at < 0:
        return html
    at += len(HEAD)
    return html[:at] + script + html[at:]


class EarlyScript:
    """Writes the early script into every plain (not compressed) HTML page this app sends."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app
        self.script = early_script().encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        start: Message | None = None  # an HTML response's start, held until its body is complete
        body: list[bytes] = []

        async def send_page(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and _is_plain_html(message["headers"]):
                start = message
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            page = with_early_script(b"".join(body), self.script)
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(page)).encode())]})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, send_page)


def _is_plain_html(headers: list[tuple[bytes, bytes]]) -> bool:
    named = {k.lower(): v for k, v in headers}
    return named.get(b"content-type", b"").startswith(b"text/html") and b"content-encoding" not in named


def early_script_middleware() -> Middleware:
    return Middleware(EarlyScript)
