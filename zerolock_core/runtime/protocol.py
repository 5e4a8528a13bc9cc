"""The control plane: every key of the rendezvous store, in one place.

The coordinator (`Run`, or rank 0 under torchrun) hosts a `TCPStore`; stage processes, their
heartbeat threads and the links read and write it. Nothing else formats a key: a reader and a
writer of the same fact call the same function here, so a renamed key cannot leave one side
behind. Per-process facts carry the stage's generation (0 for the first process of a stage, +1
for every replacement) and per-link facts the link's generation (+1 whenever either end is
replaced), so that a late write of a dead process can never be read as its replacement's.

Every key written is read by someone: the table at the bottom lists who writes and who reads.
"""
from __future__ import annotations

import time
from typing import Callable

import torch.distributed as dist

from ..telemetry.lifecycle import STARTUP_PHASES

# ---- run-wide control ------------------------------------------------------------------------
STOP = "control/stop"  # set: every stage finishes its current action, saves and exits
COMPLETE = "control/complete"  # set by the coordinator once every stage ran all its actions
RESUME_STEP = "control/resume_step"  # torchrun: the step every rank restores (-1: a fresh start); rank 0 decides
REFUSED = "control/refused"  # torchrun: rank 0 could not start the run; the reason, for every rank to print
BOUNDARIES = "control/boundaries"  # torchrun: the chunk boundaries rank 0 resolved (`--boundaries auto`), as JSON
SESSION = "control/session"  # torchrun: the restart count of the rank 0 hosting this store (torchrun_entry.py)
HIDDEN_BYTES = "meta/hidden_bytes_per_microbatch"  # one hidden state on the wire (bytes)


# ---- one stage -------------------------------------------------------------------------------
# A stage process's start-up, in order (the coordinator writes "importing" as it spawns it; the
# process the rest): every one of them counts as "still starting" for the start-up timeout.
STARTING_STATES = STARTUP_PHASES


def stage_state(stage: int) -> str:
    """one of STARTING_STATES | running | done | stopped | error | link-lost (written by the stage's
    current process)."""
    return f"stage/{stage}/state"


def stage_step(stage: int) -> str:
    """Optimizer steps the stage has completed."""
    return f"stage/{stage}/step"


def stage_error(stage: int) -> str:
    """The first error of a stage: type, message and traceback."""
    return f"stage/{stage}/error"


def actions_done(stage: int) -> str:
    """Set once the stage has run its whole action list (it may still serve replays)."""
    return f"stage/{stage}/actions_done"


def microbatches_done(stage: int) -> str:
    """The number of micro-batches whose local step has run (ZeroLock): how far a replacement replays."""
    return f"stage/{stage}/mb_done"


def heartbeat(stage: int, generation: int) -> str:
    """A counter the stage's heartbeat thread bumps a few times a second."""
    return f"hb/{stage}/gen{generation}"


def progress(stage: int, generation: int) -> str:
    """Actions the stage's process has run (written by the heartbeat thread when it changes)."""
    return f"progress/{stage}/gen{generation}"


def stage_keys_of_a_generation(stage: int) -> tuple[str, ...]:
    """What a global rollback clears, so the restarted stages start their counts afresh."""
    return (flow_consumed(stage), actions_done(stage), microbatches_done(stage), stage_step(stage))


# ---- links -----------------------------------------------------------------------------------
def link_generation(link: int) -> str:
    """The current generation of link `link` (between stages link and link + 1)."""
    return f"link/{link}/gen"


def link_prefix(link: int, generation: int) -> str:
    """The store prefix under which the link's two ends build their process group."""
    return f"link{link}/gen{generation}"


def link_hello(link: int, generation: int, rank: int) -> str:
    """Set by an end of the link once it is about to build the process group (rank 0: upstream)."""
    return f"hello/{link}/gen{generation}/{rank}"


def need(link: int, generation: int) -> str:
    """Set by the downstream end of a rebuilt link: the first micro-batch it has not received."""
    return f"need/{link}/gen{generation}"


def flow_consumed(receiver: int) -> str:
    """How many hidden states the receiver has consumed (the bounded inbound buffer)."""
    return f"flow/{receiver}/consumed"


def buffer_floor(stage: int) -> str:
    """The oldest micro-batch still in the stage's replay buffer of sent hidden states."""
    return f"buffer/{stage}/floor"


def checkpoint_cursor(stage: int) -> str:
    """The micro-batch cursor of the stage's newest durable checkpoint (its upstream prunes below it)."""
    return f"ckpt/{stage}/cursor"


# ---- recovery --------------------------------------------------------------------------------
def restored(stage: int, generation: int) -> str:
    """"<start ns> <end ns> <step> <bytes read>": the process restored its checkpoint (the instants of
    its RESTORE event)."""
    return f"recovery/{stage}/gen{generation}/restored"


def linked(stage: int, generation: int) -> str:
    """<ns>: the process is connected to its neighbours and starts its actions."""
    return f"recovery/{stage}/gen{generation}/linked"


def replay_frontier(stage: int, generation: int) -> str:
    """The micro-batch a replacement must reach to have replayed what its predecessor had done."""
    return f"recovery/{stage}/gen{generation}/frontier"


def caught_up(stage: int, generation: int) -> str:
    """<ns>: the replacement reached its replay frontier."""
    return f"recovery/{stage}/gen{generation}/caught_up"


def resent_bytes(stage: int) -> str:
    """Bytes of hidden states the stage resent from its replay buffer (a counter)."""
    return f"recovery/resent_bytes/{stage}"


# ---- injected failures -----------------------------------------------------------------------
def inject_request(stage: int) -> str:
    """A self-inflicted failure asked for by the API ("post-step" or "mid-ckpt"), fired at the next hook."""
    return f"inject/{stage}/request"


def injected(stage: int, label: str) -> str:
    """<ns>: when failure `label` hit the stage (its spec "1@3:kill", or "api:<mode>:<n>"). Set once:
    a replacement never injects a failure its predecessor already took."""
    return f"inject/{stage}/{label}/t"


def tracked_adapters(version: int) -> str:
    """`--readout track:P`: the last chunk's LoRA after `version` steps, a safetensors file's bytes
    (method/tracking.py; set by the last stage, read by the stages before it)."""
    return f"track/{version}"


# ---- helpers ---------------------------------------------------------------------------------
def get_str(store: dist.Store, key: str, default: str | None = None) -> str | None:
    return store.get(key).decode() if store.check([key]) else default


def get_int(store: dist.Store, key: str, default: int = 0) -> int:
    return int(store.get(key)) if store.check([key]) else default


def raise_if_rebuilt(store: dist.Store, *, link: int, generation: int, side: str) -> None:
    """LinkRebuilt when the coordinator has announced a generation of `link` newer than
    `generation`: the peer being waited for was replaced again, so the wait is for nothing."""
    from .errors import LinkRebuilt

    newer = get_int(store, link_generation(link), 0)
    if newer > generation:
        raise LinkRebuilt(side, newer)


def wait_for(store: dist.Store, key: str, *, timeout_s: float, what: str,
             abandon: Callable[[], None] | None = None, heed_stop: bool = True) -> str:
    """`wait_for_bytes`, decoded."""
    return wait_for_bytes(store, key, timeout_s=timeout_s, what=what, abandon=abandon, heed_stop=heed_stop).decode()


def wait_for_bytes(store: dist.Store, key: str, *, timeout_s: float, what: str,
                   abandon: Callable[[], None] | None = None, heed_stop: bool = True) -> bytes:
    """The value of `key` once someone sets it. Stops early on a stop request (StopRequested; not
    with `heed_stop=False`), calls `abandon()` while waiting (it raises to give the wait up: the peer
    it waits for was replaced) and raises TimeoutError after `timeout_s`: no wait on the store is
    unbounded."""
    from .errors import StopRequested

    t0 = time.monotonic()
    while not store.check([key]):
        if heed_stop and store.check([STOP]):
            raise StopRequested()
        if abandon is not None:
            abandon()
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"waited {timeout_s:g} s for {what} (store key {key})")
        time.sleep(0.01)
    return store.get(key)


# Who writes, who reads (stage = the stage process, hb = its heartbeat thread, coord = Run or rank 0):
#   STOP                 coord, a failing stage     -> stages, waits
#   COMPLETE             coord                      -> stages serving replays
#   RESUME_STEP          rank 0 (torchrun)          -> every rank, before its stage starts
#   REFUSED              rank 0 (torchrun)          -> every rank (the one-line reason)
#   SESSION              rank 0 (torchrun)          -> every rank (a restarted rank finds an older session)
#   HIDDEN_BYTES         stage                      -> coord (bytes a global replay resends)
#   stage_state/step     stage                      -> coord (status, injections, recovery policy)
#   stage_error          stage                      -> coord (metrics.json errors)
#   actions_done         stage                      -> coord (COMPLETE)
#   microbatches_done    stage                      -> its replacement (replay frontier)
#   heartbeat/progress   hb                         -> coord (failure and stall detection)
#   link_generation      coord                      -> stages (rebuild a link)
#   need                 downstream stage           -> upstream stage (what to resend)
#   link_hello           each end of a link         -> the other end (its peer is alive and connecting)
#   flow_consumed        receiving stage            -> sending stage, coord (restore point)
#   buffer_floor         stage                      -> coord (is a local replay possible)
#   checkpoint_cursor    stage                      -> its upstream stage (prune the replay buffer)
#   restored/linked/frontier/caught_up, resent_bytes  stage -> coord (recovery records)
#   inject_request       coord                      -> stage;  injected: stage or coord -> both
#   tracked_adapters     the last stage             -> the stages before it (--readout track:P)
