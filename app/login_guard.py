"""With a password, the dashboard answers nothing but its login page before a login, and a client that
keeps guessing waits longer and longer (an ASGI middleware in front of every route).

Gradio checks the login on most of its routes, not all: `POST /gradio_api/cancel` and `/reset`,
`/heartbeat/…`, `/app_id`, `/manifest.json` answered without one; and its `/login` took
guesses as fast as they came (50 wrong ones in 0.2 s). Here every path but the login page's own (the page,
its scripts, styles and fonts, as a browser loads it) needs Gradio's login cookie, whatever Gradio's route
checks; and `/login` goes through a per-client back-off (LoginBackoff)."""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from starlette.middleware import Middleware
from starlette.requests import HTTPConnection

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

LOGIN_PATHS = ("/login", "/login/")
# what the login page loads before anyone has logged in (recorded in a browser), the logout, and the route
# Gradio's launch calls itself without a login (it starts the app's queue, once; it answers a bool)
OPEN_PATHS = ("/", "/theme.css", "/favicon.ico", "/logout", "/gradio_api/startup-events")
OPEN_PREFIXES = ("/assets/", "/static/")


@dataclass(kw_only=True)
class LoginBackoff:
    """Failed logins per client (its address). `free` failures in a row are answered at once; after that the
    client is locked out for `first_s`, doubling with each further failure, at most `most_s`; a login
    during a lock is refused unseen and does not count. Each try counts as a failure from the moment it is
    admitted until it succeeds, so tries sent at once cannot slip past the count. A success, or `forget_s`
    without a failure, clears the client's count. `clock` is injected by tests (no test sleeps)."""
    free: int = 5
    first_s: float = 1.0
    most_s: float = 300.0
    forget_s: float = 3600.0
    clients_kept: int = 10_000  # the oldest counts are dropped past this (a flood of addresses)
    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, tuple[int, float]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        assert self.free >= 1 and 0 < self.first_s <= self.most_s and self.forget_s > 0 and self.clients_kept >= 1

    def wait_s(self, client: str) -> float:
        """Seconds `client` must wait before its next try is looked at (0: it may try now)."""
        count, at = self._failures.get(client, (0, -math.inf))
        now = self.clock()
        if now - at >= self.forget_s:
            self._failures.pop(client, None)
            return 0.0
        if count < self.free:
            return 0.0
        lock = min(self.most_s, self.first_s * 2.0 ** (count - self.free))
        return max(0.0, at + lock - now)

    def admit(self, client: str) -> float:
        """0 when `client` may try now (the try is counted as a failure until `succeeded`), else the seconds
        it must wait (nothing counted)."""
        wait = self.wait_s(client)
        if wait > 0:
            return wait
        count, _ = self._failures.get(client, (0, 0.0))
        self._failures[client] = (count + 1, self.clock())
        if len(self._failures) > self.clients_kept:
            oldest = min(self._failures, key=lambda c: self._failures[c][1])
            del self._failures[oldest]
        return 0.0

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)

    def failures(self, client: str) -> int:
        return self._failures.get(client, (0, 0.0))[0]


class LoginGuard:
    """Refuses (401) every request but the login page's own until the client has logged in, when the app has
    a password; passes `/login` through `backoff` (429 and Retry-After while a client is locked out)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], *, backoff: LoginBackoff) -> None:
        self.app = app
        self.backoff = backoff

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gradio = scope.get("app")
        if scope["type"] not in ("http", "websocket") or getattr(gradio, "auth", None) is None:
            await self.app(scope, receive, send)  # no password (or Gradio's own auth_dependency): Gradio's rules
            return
        path = _app_path(scope)
        if path in LOGIN_PATHS and scope.get("method") == "POST":
            await self._login(scope, receive, send)
        elif _is_open(path, scope.get("method")) or _logged_in(gradio, scope):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await _answer(send, 401, "Not authenticated: log in first")

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = (scope.get("client") or ("?", 0))[0]
        wait = self.backoff.admit(client)
        if wait > 0:
            await _answer(send, 429, f"Too many failed logins from this address: try again in {math.ceil(wait)} s",
                          [(b"retry-after", str(math.ceil(wait)).encode())])
            return

        async def send_seen(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                self.backoff.succeeded(client)
            await send(message)

        await self.app(scope, receive, send_seen)


def _app_path(scope: Scope) -> str:
    """The request's path inside the app (behind a proxy the app may live under a prefix)."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    return (path[len(root):] or "/") if root and path.startswith(root) else path


def _is_open(path: str, method: str | None) -> bool:
    return method in ("GET", "HEAD") and (path in OPEN_PATHS or path.startswith(OPEN_PREFIXES))


def _logged_in(gradio: Any, scope: Scope) -> bool:
    """Gradio's own test (routes.py, get_current_user): either of its cookies holds a token it issued."""
    cookies = HTTPConnection(scope).cookies
    cookie_id = getattr(gradio, "cookie_id", "")
    tokens = getattr(gradio, "tokens", {})
    return any(cookies.get(name) in tokens
               for name in (f"access-token-{cookie_id}", f"access-token-unsecure-{cookie_id}"))


async def _answer(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def login_guard_middleware(backoff: LoginBackoff | None = None) -> Middleware:
    return Middleware(LoginGuard, backoff=backoff or LoginBackoff())
