"""With a password, the dashboard answers nothing but its login page before a login (Gradio's own routes
that skip the check included: cancel, reset, heartbeat, ...), and wrong logins lock the client out for
longer and longer. The back-off's clock is a fake one: no test sleeps or measures time."""
from __future__ import annotations

import httpx
import pytest
from gradio_client import Client

from app.login_guard import LoginBackoff
from app.page.plotly_asset import plotly_path
from app.ui import build_app
from benchmarks.common.machine import free_port

pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]

USER, PASSWORD = "zerolock", "s3cret"
FREE = 3  # wrong logins answered at once before the first lock


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    clock = FakeClock()
    demo = build_app(runs_root=tmp_path_factory.mktemp("runs"))
    port = free_port()
    demo.launch(**demo.page_options(login_backoff=LoginBackoff(free=FREE, first_s=1, most_s=8, clock=clock)),
                auth=[(USER, PASSWORD)], prevent_thread_lock=True, server_name="127.0.0.1", server_port=port,
                quiet=True)
    try:
        yield f"http://127.0.0.1:{port}", clock
    finally:
        demo.controller.close()
        demo.close()


EVENT = {"session_hash": "abc", "fn_index": 0, "event_id": "e"}
# method, path, body: every one answers 401 before a login
CLOSED = [
    ("POST", "/gradio_api/cancel", EVENT),  # Gradio's route checks no login: it answered {"success": true}
    ("POST", "/gradio_api/reset", EVENT),
    ("GET", "/gradio_api/heartbeat/abc", None),
    ("GET", "/gradio_api/app_id", None),
    ("GET", "/manifest.json", None),
    ("GET", "/gradio_api/info", None),
    ("GET", "/config", None),
    ("POST", "/gradio_api/run/watch_line", {"data": []}),
    ("POST", "/gradio_api/queue/join", {"data": [], "fn_index": 0, "session_hash": "abc"}),
    ("GET", "/gradio_api/queue/data?session_hash=abc", None),
    ("POST", "/gradio_api/upload", None),
    ("GET", "/gradio_api/file=/etc/passwd", None),
    ("GET", "/gradio_api/openapi.json", None),
    ("GET", "/monitoring", None),
    ("GET", plotly_path(), None),
    ("POST", "/", None),  # the page is open to GET only
]


@pytest.mark.parametrize("method,path,body", CLOSED)
def test_every_route_but_the_login_page_refuses_a_client_that_has_not_logged_in(guarded, method, path, body):
    base, _ = guarded
    reply = httpx.request(method, base + path, json=body, timeout=30)
    assert reply.status_code == 401, (path, reply.status_code, reply.text[:200])
    assert "success" not in reply.text


def test_the_login_page_itself_is_served_before_a_login(guarded):
    base, _ = guarded
    page = httpx.get(base + "/", timeout=30)
    assert page.status_code == 200 and '"auth_required":true' in page.text.replace(" ", "")
    assert httpx.get(base + "/theme.css", timeout=30).status_code == 200


def login(base: str, password: str) -> httpx.Response:
    return httpx.post(f"{base}/login", data={"username": USER, "password": password}, timeout=30)


def test_a_logged_in_client_reaches_cancel_and_the_api(guarded):
    base, clock = guarded
    clock.now += 10_000  # any earlier failures forgotten
    reply = login(base, PASSWORD)
    assert reply.status_code == 200
    with httpx.Client(cookies=reply.cookies, timeout=30) as session:
        assert session.post(f"{base}/gradio_api/cancel", json=EVENT).json() == {"success": True}
        assert session.post(f"{base}/gradio_api/run/watch_line", json={"data": []}).status_code == 200
    client = Client(base + "/", auth=(USER, PASSWORD), verbose=False)  # logs in through the same /login
    assert "busy" in client.predict(api_name="/status")


def test_wrong_logins_lock_the_client_out_for_longer_each_time_and_a_success_clears_them(guarded):
    base, clock = guarded
    clock.now += 10_000
    assert [login(base, f"guess{i}").status_code for i in range(FREE)] == [400] * FREE
    locked = login(base, PASSWORD)  # refused unseen during the lock, the right password too
    assert locked.status_code == 429 and locked.headers["retry-after"] == "1" and "try again in 1 s" in locked.text
    assert [login(base, f"guess{i}").status_code for i in range(50)] == [429] * 50  # no guess is tried
    clock.now += 1
    assert login(base, "wrong again").status_code == 400
    assert login(base, PASSWORD).headers["retry-after"] == "2"  # doubled
    clock.now += 2
    assert login(base, PASSWORD).status_code == 200  # the count is cleared
    assert [login(base, f"guess{i}").status_code for i in range(FREE)] == [400] * FREE


# (clock advance s, "fail" | "ok" | "refused") -> the wait after it; free=2, first 1 s, at most 4 s
STEPS = [
    (0, "fail", 0), (0, "fail", 1), (0, "refused", 1), (0.5, "refused", 0.5), (0.5, "fail", 2), (2, "fail", 4),
    (4, "fail", 4), (4, "ok", 0), (0, "fail", 0), (0, "fail", 1),
    (100, "fail", 0),  # forget_s=100 after the last failure: the count starts again
]


def test_login_backoff_counts_failures_doubles_its_lock_and_forgets(tmp_path):
    clock = FakeClock()
    backoff = LoginBackoff(free=2, first_s=1, most_s=4, forget_s=100, clock=clock)
    for n, (advance, event, wait) in enumerate(STEPS):
        clock.now += advance
        admitted = backoff.admit("10.0.0.1") == 0
        assert admitted == (event != "refused"), n
        if event == "ok":
            backoff.succeeded("10.0.0.1")
        assert backoff.wait_s("10.0.0.1") == wait, n
        assert backoff.wait_s("10.0.0.2") == 0  # per client


def test_login_backoff_keeps_a_bounded_number_of_clients():
    clock = FakeClock()
    backoff = LoginBackoff(clients_kept=3, clock=clock)
    for n in range(5):
        clock.now += 1
        backoff.admit(f"10.0.0.{n}")
    assert [backoff.failures(f"10.0.0.{n}") for n in range(5)] == [0, 0, 1, 1, 1]
