"""Heartbeats: a stage bumps a counter in the coordinator's store a few times a second from a
thread of its own (with its own store connection), and publishes how many actions it has run
whenever that changes. A stage that stops beating — killed, or hung by SIGSTOP, which freezes
every thread — is declared failed by the coordinator; a pipeline whose action counts stop moving
is declared stalled.

The same thread is how a stage notices that the coordinator is gone (its store refuses the
connection): the process then exits on its own at once, so no stage outlives its run. Its
checkpoints stay on disk for `zerolock train --resume`.
"""
from __future__ import annotations

import datetime
import os
import sys
import threading
from typing import Callable

import torch.distributed as dist

from ..config.run_config import HEARTBEAT_INTERVAL_S as INTERVAL_S
from . import protocol
from .processes import ORPHANED_EXIT

STORE_OP_TIMEOUT_S = 30.0


class Heartbeat:
    def __init__(self, host: str, port: int, stage: int, generation: int,
                 progress: Callable[[], int] = lambda: 0) -> None:
        self._store = dist.TCPStore(host, port, is_master=False,
                                    timeout=datetime.timedelta(seconds=STORE_OP_TIMEOUT_S))
        self._stage = stage
        self._key = protocol.heartbeat(stage, generation)
        self._progress_key = protocol.progress(stage, generation)
        self.progress = progress  # replaced once the stage has an executor
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"zerolock-heartbeat{stage}")
        self._thread.start()

    def _beat(self) -> None:
        published = -1
        while not self._stop.is_set():
            try:
                self._store.add(self._key, 1)
                n = self.progress()
                if n != published:
                    self._store.set(self._progress_key, str(n))
                    published = n
            except Exception as err:
                if self._stop.is_set():
                    return
                # The coordinator (the store's host) is gone: nobody will ever read our work.
                print(f"zerolock stage {self._stage}: lost the coordinator's store ({type(err).__name__}); "
                      f"exiting (checkpoints are kept: `zerolock train --resume RUN_DIR`)", file=sys.stderr,
                      flush=True)
                os._exit(ORPHANED_EXIT)
            self._stop.wait(INTERVAL_S)

    def close(self) -> None:
        self._stop.set()
