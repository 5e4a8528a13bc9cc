"""`zerolock dashboard`: the flags, and the function the CLI calls."""
from __future__ import annotations

import argparse
import os

from zerolock_core.viz.poll_interval import DEFAULT_POLL_S, FIGURES_EVERY_S
from zerolock_core.rundir.runs_root import DEFAULT_RUNS


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; anything else needs --password)")
    parser.add_argument("--port", type=int, default=None, help="port (default 7860, or the next free one)")
    parser.add_argument("--user", default="zerolock", help="user name for the password login")
    parser.add_argument("--password", default=os.environ.get("ZEROLOCK_DASHBOARD_PASSWORD"),
                        help="require this password (default: $ZEROLOCK_DASHBOARD_PASSWORD)")
    parser.add_argument("--runs-dir", default=DEFAULT_RUNS,
                        help=f"where runs are written and listed; the dashboard acts on runs in it only "
                             f"(default {DEFAULT_RUNS}/)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser tab")
    parser.add_argument("--poll", type=float, default=DEFAULT_POLL_S,
                        help=f"seconds between the Watch tab's status-line updates (default {DEFAULT_POLL_S:g}; at "
                             f"least 0.5, i.e. at most 2 a second); its figures are redrawn every "
                             f"{FIGURES_EVERY_S:g} s, or this if longer. Watching costs the browser CPU: on a small "
                             "machine, a longer interval leaves more to the training")
    parser.set_defaults(func=run_dashboard)


def run_dashboard(args: argparse.Namespace) -> int:
    from .server import ServeOptions, serve  # gradio, torch: only when the dashboard really starts

    return serve(ServeOptions(host=args.host, port=args.port, user=args.user, password=args.password,
                              runs_dir=args.runs_dir, open_browser=not args.no_browser, poll_s=args.poll))
