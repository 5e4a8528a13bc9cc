"""How the engine starts its child processes: forked from one server that has imported the engine.

A fresh interpreter spends seconds importing torch, transformers and peft before a stage does any
work of its own (measured in stage start-up: 4–5 s importing, 10–15 s "loading" that was mostly the
lazy imports of transformers' model and tokenizer modules, three processes at once on 2 cores).
`multiprocessing`'s forkserver pays that once per coordinator: its server imports `PRELOAD`, then
forks every stage, replacement and evaluation process from itself, so they start with the imports
done. `warm_up()` starts the server ahead of the first run (the dashboard does it at launch).

A forked child would otherwise inherit the server's environment and working directory, captured
when the server started; `start_process` hands it the caller's current ones instead, so a child
sees what a spawned one would (`ZEROLOCK_CACHE` set after the server started, a relative path).
The server imports nothing that starts a thread or touches CUDA: forking it is safe.

`ZEROLOCK_START_METHOD=spawn` falls back to a fresh interpreter per process.
"""
from __future__ import annotations

import gc
import os
import sys
from typing import Any, Callable

import torch.multiprocessing as mp

START_METHOD_ENV = "ZEROLOCK_START_METHOD"
# torch's C++ side logs every failed store call as a warning with 20-70 lines of stack frames; a stage
# whose coordinator went away would print them by the dozen. The engine reports those failures in its
# own words, so its children log C++ errors only (set it yourself, e.g. INFO, to see everything).
CPP_LOG_LEVEL_ENV, CPP_LOG_LEVEL = "TORCH_CPP_LOG_LEVEL", "ERROR"
ORPHANED_EXIT = 4  # the exit code of a child whose coordinator disappeared
START_METHODS = ("forkserver", "spawn")
PRELOAD = (
    "torch", "torch.distributed", "transformers", "transformers.models.llama.modeling_llama",
    "transformers.models.auto.tokenization_auto", "peft", "safetensors.torch",
    "zerolock_core.runtime.stage_process", "zerolock_core.runtime.final_eval", "zerolock_core.train.run_setup",
    "zerolock_core.data", "zerolock_core.rundir.encoded_data_cache", "zerolock_core.method.chunks",
)


def start_method() -> str:
    method = os.environ.get(START_METHOD_ENV, "forkserver")
    if method not in START_METHODS:
        raise ValueError(f"{START_METHOD_ENV}={method!r} is not one of {', '.join(START_METHODS)}")
    return method


def context():
    os.environ.setdefault(CPP_LOG_LEVEL_ENV, CPP_LOG_LEVEL)  # read by torch in the server / a spawned child
    ctx = mp.get_context(start_method())
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(list(PRELOAD))  # ignored once the server runs: it has them
    return ctx


def warm_up() -> None:
    """Start the forkserver now (it imports `PRELOAD`), so the first run does not wait for it."""
    if start_method() == "forkserver":
        context()
        from multiprocessing import forkserver

        forkserver.ensure_running()


def server_pid() -> int | None:
    """The forkserver's pid while it runs (it lives as long as this process; its children are ours)."""
    from multiprocessing import forkserver

    return getattr(forkserver._forkserver, "_forkserver_pid", None)  # no public accessor


def _as_if_spawned(env: dict[str, str], cwd: str, target: Callable[..., Any], args: tuple) -> None:
    # What the server imported lives as long as the child: moved out of the collector's reach, a full
    # collection no longer walks torch's and transformers' millions of objects (0.54 s -> under 1 ms in a
    # stage's build, measured; that walk was most of a replacement's restart)
    gc.freeze()
    die_with_parent()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    target(*args)


def start_process(target: Callable[..., Any], args: tuple, *, name: str):
    """Start `target(*args)` in a child process (started, not joined)."""
    p = context().Process(target=_as_if_spawned, args=(dict(os.environ), os.getcwd(), target, args), name=name)
    p.start()
    return p


def pipe():
    return context().Pipe()


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child forked by the process server: be killed when the server dies (it exits with its
    coordinator), so no stage outlives a coordinator that was killed — even one still starting, before
    its heartbeat could notice. Linux only; elsewhere (and under `spawn`, whose parent is a thread of
    the coordinator that may end first) the heartbeat's check is what remains."""
    if start_method() != "forkserver" or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the server died before we could ask
        os._exit(ORPHANED_EXIT)
