"""A warm standby process for fault-tolerant runs.

Starting a stage process costs seconds that have nothing to do with the stage: a fresh Python
interpreter importing torch, transformers and peft (about 5 s on 2 cores, measured in
`zerolock bench recovery`). A standby pays that once, ahead of time, while the run trains, then
waits on a pipe; when a stage fails, the coordinator hands it the replacement's launch and it
becomes that stage process at once. The same standby evaluates the final weights when no stage
needed it. It does nothing else: the work it is given runs exactly as in a freshly spawned process.
"""
from __future__ import annotations

import signal
from multiprocessing.connection import Connection
from typing import Any, Callable


def standby_main(conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the coordinator, as for a stage
    import peft  # noqa: F401  (the imports are the point: they are what a replacement would wait for)
    import transformers  # noqa: F401

    from . import evaluate_run, stage_process  # noqa: F401
    from .. import workbench  # noqa: F401

    try:
        conn.send("ready")  # the coordinator records whether a replacement found us warm
    except (BrokenPipeError, OSError):
        pass  # work was handed over while we imported, and the coordinator closed its end: read it
    try:
        work: tuple[Callable[..., Any], tuple[Any, ...]] | None = conn.recv()
    except EOFError:  # the run ended without needing us
        return
    finally:
        conn.close()
    if work is not None:
        target, args = work
        target(*args)
