"""A warm standby process for fault-tolerant runs.

Starting a stage process in a fresh interpreter costs seconds that have nothing to do with the
stage: importing torch, transformers and peft (about 5 s on 2 cores, measured in `zerolock bench
recovery`). A standby pays that once, ahead of time, while the run trains — and makes the run's tokenizer and
encoded data (`run_setup.prepare`), which a forked replacement would otherwise read — then waits on a pipe;
when a stage fails, the coordinator hands it the replacement's launch and it becomes that stage
process at once. The same standby evaluates the final weights when no stage needed it. It does
nothing else: the work it is given runs exactly as in a freshly started process.

Since processes are forked from a server that has those imports done (`processes.py`), a fresh
replacement starts about as warm as a standby; the standby matters with
`ZEROLOCK_START_METHOD=spawn`, and it still saves the fork.
"""
from __future__ import annotations

import gc
import signal
from multiprocessing.connection import Connection
from typing import Any, Callable

import torch.multiprocessing as mp

from .processes import pipe, start_process


def standby_main(conn: Connection, prepare: tuple[Callable[..., Any], tuple[Any, ...]] | None = None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the coordinator, as for a stage
    import peft  # noqa: F401  (the imports are the point: they are what a replacement would wait for)
    import transformers  # noqa: F401

    from . import final_eval, stage_process  # noqa: F401
    from ..train import run_setup  # noqa: F401

    if prepare is not None:  # what any stage of the run starts with (run_setup.prepare: tokenizer, data)
        try:
            prepare[0](*prepare[1])
        except Exception:  # noqa: BLE001  a replacement makes it itself then, and says what is wrong
            pass
        gc.freeze()  # as after the imports (processes.py): what it prepared stays, and is not walked again

    try:
        conn.send("ready")  # the coordinator records whether a replacement found us warm
    except (BrokenPipeError, OSError):
        pass  # work was handed over while we imported, and the coordinator closed its end: read it
    try:
        work: tuple[Callable[..., Any], tuple[Any, ...]] | None = conn.recv()
    except EOFError:  # the run ended (or its coordinator died) without needing us
        return
    finally:
        conn.close()
    if work is not None:
        target, args = work
        target(*args)


class Standby:
    """At most one spare process, kept by the coordinator."""

    def __init__(self) -> None:
        self._spare: tuple[mp.Process, Connection] | None = None

    @property
    def alive(self) -> bool:
        return self._spare is not None and self._spare[0].is_alive()

    @property
    def ready(self) -> bool:
        """A standby is waiting with its imports done (a replacement would start from it)."""
        try:
            return self.alive and self._spare[1].poll()
        except (EOFError, OSError):
            return False

    def start(self, prepare: tuple[Callable[..., Any], tuple[Any, ...]] | None = None) -> None:
        """Start the spare; `prepare` (a function and its arguments) runs in it before it says it is ready."""
        if self.alive:
            return
        mine, theirs = pipe()
        p = start_process(standby_main, (theirs, prepare), name="zerolock-standby")
        theirs.close()
        self._spare = (p, mine)

    def take(self, target: Callable[..., Any], args: tuple) -> tuple[mp.Process | None, str | None]:
        """Hand `target(*args)` to the standby: (its process, "ready" | "warming"), or (None, None)
        if there is none alive."""
        if self._spare is None:
            return None, None
        p, conn = self._spare
        self._spare = None
        try:
            if not p.is_alive():
                return None, None
            ready = conn.poll() and conn.recv() == "ready"
            conn.send((target, args))
            return p, ("ready" if ready else "warming")
        except (BrokenPipeError, EOFError, OSError):
            return None, None
        finally:
            conn.close()

    def drop(self) -> None:
        if self._spare is None:
            return
        p, conn = self._spare
        self._spare = None
        try:
            conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        conn.close()
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join(5)
