"""Heartbeats: a stage bumps a counter in the coordinator's store a few times a second from a
thread of its own (with its own store connection). A stage that stops beating — killed, or
hung by SIGSTOP, which freezes every thread — is declared failed by the coordinator."""
from __future__ import annotations

import threading

import torch.distributed as dist

INTERVAL_S = 0.2


def heartbeat_key(stage: int, generation: int) -> str:
    return f"hb/{stage}/gen{generation}"


class Heartbeat:
    def __init__(self, host: str, port: int, stage: int, generation: int) -> None:
        self._store = dist.TCPStore(host, port, is_master=False)
        self._key = heartbeat_key(stage, generation)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"zerolock-heartbeat{stage}")
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.is_set():
            try:
                self._store.add(self._key, 1)
            except Exception:  # the coordinator is gone; the stage will notice on its own
                return
            self._stop.wait(INTERVAL_S)

    def close(self) -> None:
        self._stop.set()
