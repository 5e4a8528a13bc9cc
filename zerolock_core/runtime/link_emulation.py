"""Link emulation: a real delay on the real transfers between two stages.

A message of N bytes put on an emulated hop occupies the hop for N / bandwidth seconds (messages
in one direction queue behind each other) and arrives `latency` after it left, the same model
as the schedule simulator's `LinkProfile`. The sender does not block: a thread per direction holds the
message until its modelled arrival time and then hands it to the real transport.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

from ..config.run_config import LinkConfig
from ..schedule import LINK_PROFILES, LinkProfile


def link_model(cfg: LinkConfig) -> LinkProfile | None:
    """The modelled link for a config, or None when there is no emulation."""
    if cfg.profile == "none":
        return None
    base = LINK_PROFILES[cfg.profile] if cfg.profile != "custom" else LinkProfile()
    bw = base.bandwidth_bytes_per_s if cfg.bandwidth_mbps is None else cfg.bandwidth_mbps * 1e6 / 8
    lat = base.latency_s if cfg.latency_ms is None else cfg.latency_ms / 1e3
    return LinkProfile(bandwidth_bytes_per_s=bw, latency_s=lat)


def link_for(cfg: LinkConfig) -> LinkProfile:
    """The link the schedule simulator models for a config: the emulated one, or the ideal link."""
    model = link_model(cfg)
    return model if model is not None else LINK_PROFILES["ideal"]


@dataclass
class _Pending:
    nbytes: int
    start: callable  # () -> real Work
    done: threading.Event
    work: object = None
    error: BaseException | None = None
    arrival_s: float = 0.0  # modelled arrival, perf_counter seconds


class DelayedWork:
    """What an emulated send returns: wait() returns once the real send has completed."""

    def __init__(self, pending: _Pending) -> None:
        self._p = pending

    def wait(self) -> bool:
        self._p.done.wait()
        if self._p.error is not None:
            raise self._p.error
        return self._p.work.wait()


class EmulatedHop:
    """One direction of one link."""

    def __init__(self, model: LinkProfile) -> None:
        self.model = model
        self._busy_until = 0.0
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True, name="zerolock-link")
        self._thread.start()

    def submit(self, nbytes: int, start) -> DelayedWork:
        now = time.perf_counter()
        leave = max(now, self._busy_until) + self.model.wire_s(nbytes)
        self._busy_until = leave
        p = _Pending(nbytes=nbytes, start=start, done=threading.Event(), arrival_s=leave + self.model.latency_s)
        self._queue.put(p)
        return DelayedWork(p)

    def _run(self) -> None:
        while True:
            p = self._queue.get()
            if p is None:
                return
            delay = p.arrival_s - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            try:
                p.work = p.start()
            except BaseException as err:  # surfaced to the caller's wait()
                p.error = err
            p.done.set()

    def close(self) -> None:
        self._queue.put(None)
