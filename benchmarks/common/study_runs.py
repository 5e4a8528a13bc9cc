"""A study's runs (`bench depth`, `bench frontier`) side by side, each a `zerolock train` process of its own,
and a stop that leaves none of them behind.

Python ends on SIGTERM without running any `finally`, so a study killed with `kill PID` (or a job
scheduler's stop) left its `zerolock train` children training on, unowned, into run directories the next
invocation would find held. Here SIGINT and SIGTERM to the study only record the request (`StopSignals`);
every child still running is then sent SIGTERM — a run's own stop request: it checkpoints, ends its
metrics `stopped`, and the study's next invocation resumes it — and waited for, STOP_GRACE_S at most before
SIGKILL. The study then ends as Ctrl-C ends any command (KeyboardInterrupt: "zerolock: interrupted").
"""
from __future__ import annotations

import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

from zerolock_core.jobs.stop_signals import StopSignals

T = TypeVar("T")
R = TypeVar("R")

POLL_S = 0.2  # how often a waiting thread looks for a stop request
STOP_GRACE_S = 120.0  # a stopped child's time to checkpoint and end (a step of SmolLM2 at K = 4: ~10 s)

_stop = threading.Event()  # set by the study's signal handler (main thread), read by the threads waiting


def stop_requested() -> bool:
    return _stop.is_set()


def _end(child: subprocess.Popen) -> None:
    """Ask a child to stop (SIGTERM) and wait for it; SIGKILL if it has not ended within the grace."""
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def call(cmd: list[str], *, stdout) -> int:
    """Run `cmd` (stderr into `stdout`) to its end and return its exit code; once the study is asked to stop,
    stop it too and raise KeyboardInterrupt after it has ended."""
    with subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.STDOUT) as child:
        while True:
            try:
                code = child.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                if _stop.is_set():
                    _end(child)
                    break
    if _stop.is_set():
        raise KeyboardInterrupt
    return code


def side_by_side(work: Callable[[T], R], items: Iterable[T], *, jobs: int) -> Iterator[tuple[T, R]]:
    """(item, work(item)) for each item, `jobs` at a time, in order; SIGINT and SIGTERM to the study stop
    every running `call` (above) and end the iteration with KeyboardInterrupt once they have ended. Must be
    consumed in the main thread (signal handlers are the main thread's)."""
    _stop.clear()
    with StopSignals(on_stop=_stop.set), ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [(item, pool.submit(work, item)) for item in items]
        try:
            for item, future in futures:
                while not _stop.is_set():  # not a bare result(): the main thread looks at the stop flag too
                    try:
                        result = future.result(timeout=POLL_S)
                    except TimeoutError:
                        continue
                    yield item, result
                    break
        finally:
            if _stop.is_set():
                for _, f in futures:
                    f.cancel()  # the runs not started yet never start
    if _stop.is_set():  # the pool has waited for its threads: each `call` has ended its child
        raise KeyboardInterrupt
