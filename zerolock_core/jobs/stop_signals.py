"""Ctrl-C (SIGINT) and SIGTERM (`kill PID`, a job scheduler) as a stop request that cannot be lost.

Python's default SIGINT handler raises KeyboardInterrupt in the main thread between two bytecodes,
wherever it happens to be: inside a `__del__` or a weakref callback of a collected object, where the
exception is printed as "Exception ignored" and dropped, or inside a library's `except BaseException`.
A run then trains to its end as if nobody had asked it to stop. Here a signal only *records* the
request: the handler sets a number and a flag and returns, raising nothing, so there is nothing to
swallow; the program acts on the request when it next looks (the coordinator ticks every 50 ms).
The handler takes no lock (it may interrupt a thread holding one) and prints nothing (it may
interrupt a print to the same stream).
"""
from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """While entered (from the main thread), SIGINT and SIGTERM call `on_stop()`, which must only
    record the request (set an attribute): it runs inside the signal handler. `received` counts them."""

    def __init__(self, on_stop: Callable[[], None] = lambda: None) -> None:
        self.on_stop = on_stop
        self.received = 0
        self._previous: dict[int, object] = {}

    @property
    def requested(self) -> bool:
        return self.received > 0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received += 1
        self.on_stop()

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("stop signals can only be handled in the main thread")
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
