"""Launching the dashboard: loopback by default; any other address needs a password."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from zerolock_core.config.field_words import ConfigError
from zerolock_core.viz.poll_interval import DEFAULT_POLL_S, check_poll
from zerolock_core.rundir.runs_root import DEFAULT_RUNS

from .controller import EngineController

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(kw_only=True, frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int | None = None  # None: 7860, or the next free port
    user: str = "zerolock"
    password: str | None = None
    runs_dir: str = DEFAULT_RUNS
    open_browser: bool = True
    poll_s: float = DEFAULT_POLL_S

    def __post_init__(self) -> None:
        check_binding(self.host, self.password)
        if self.port is not None and not 1 <= self.port <= 65535:
            raise ConfigError(f"--port must be in 1..65535 (got {self.port})")
        if not self.user:
            raise ConfigError("--user must not be empty")
        try:
            check_poll(self.poll_s)
        except ValueError as err:
            raise ConfigError(str(err)) from None

    @property
    def auth(self) -> list[tuple[str, str]] | None:
        return [(self.user, self.password)] if self.password else None


def check_binding(host: str, password: str | None) -> None:
    """The dashboard starts training processes on this machine: never expose it without a password."""
    if host not in LOOPBACK and not password:
        raise ConfigError(f"--host {host} would let anyone on the network start and stop training here; "
                          "give --password too (or set ZEROLOCK_DASHBOARD_PASSWORD), or use --host 127.0.0.1")


def serve(opts: ServeOptions) -> int:
    """Build the app, serve it until Ctrl-C or SIGTERM (recorded, never lost: stop_signals.py), then stop
    the app's runs."""
    from zerolock_core.runtime.processes import warm_up
    from zerolock_core.jobs.stop_signals import StopSignals

    from .data_uploads import sweep_staging
    from .gradio_temp import own_temp_dir, remove_temp_dir

    runs_root = Path(opts.runs_dir).resolve()
    temp_dir = own_temp_dir(runs_root)  # before Gradio builds the app: it reads GRADIO_TEMP_DIR then
    sweep_staging(runs_root)  # uploads a killed dashboard was checking
    from .ui import build_app

    warm_up()  # the process server imports the engine while the page loads: the first Run starts warm
    controller = EngineController(runs_root)
    demo = build_app(controller, poll_s=opts.poll_s)
    with StopSignals() as signals:
        try:
            # quiet: Gradio's own banner suggests share=True, a public tunnel this app must not open
            demo.launch(**demo.page_options(), server_name=opts.host, server_port=opts.port, auth=opts.auth,
                        inbrowser=opts.open_browser,
                        allowed_paths=[str(runs_root)], footer_links=["api", "settings"], quiet=True,
                        prevent_thread_lock=True,
                        run_history=False)  # the 2 Hz poll would fill the browser's run history
            print(f"zerolock dashboard: {demo.local_url} (runs in {runs_root}; Ctrl-C stops it and its runs)",
                  flush=True)
            while not signals.requested:
                time.sleep(0.2)
        finally:
            print("zerolock dashboard: stopping its runs ...", flush=True)
            controller.close()
            demo.close()
            remove_temp_dir(temp_dir)
    return 0
