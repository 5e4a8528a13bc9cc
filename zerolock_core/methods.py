"""The training methods, each described once: one `Method` entry per method, and the lists and rules
every other module reads from them.

A method's name (what `--method` takes), its label and colour (every figure, the dashboard's form and
legends), the runtimes it runs on (the CLI's choices), the schedule builder it runs
(schedule/builders.py), whether its backward is split into B and W, whether it trains on local losses
(no update locking), how a failed stage is recovered (runtime/recovery_policy.py) and whether its
schedule needs m >= K all live here. Adding a method is adding one entry to `METHODS` (and, if it has a
schedule of its own, the builder of that name); the CLI, the dashboard's form, Explain, the fault
policy and the benchmarks read their lists from the registry (tests/test_methods.py walks them).

A leaf: it imports nothing of the engine, so every room, config/ included, may read it.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

REFERENCE = "reference"  # the single-process runtime (train/reference_trainer.py)
PIPELINE = "pipeline"  # one process per stage over torch.distributed (runtime/)
RUNTIMES = (REFERENCE, PIPELINE)


class Recovery(StrEnum):
    """How the pipeline runtime recovers a failed stage of the method."""
    LOCAL = "local"  # only the failed stage restarts, replayed from its neighbours (runtime/recovery_policy.py)
    GLOBAL = "global"  # every stage rolls back to the newest step all of them checkpointed
    NONE = "none"  # not at all: a scheduled or injected failure is refused with the method's `refusal`


@dataclass(kw_only=True, frozen=True)
class Method:
    name: str  # what --method takes ("zb-h1")
    label: str  # what every view shows ("ZB-H1")
    colour: str  # its colour in every figure: a dark, saturated earth tone (viz/palette.py's method family)
    runtimes: tuple[str, ...]  # where it runs; () = the simulator and Explain only
    schedule: str | None  # the schedule builder it runs (schedule/builders.py); None = no pipeline schedule
    splits_backward: bool = False  # B (input gradient) now, W (weight gradient) later: zero bubble
    local: bool = False  # its chunks train on local losses: no gradient crosses a boundary, no update locking
    last_chunk_only: bool = False  # only the last chunk's weights train (the others run forward only)
    recovery: Recovery | None = None  # how a failed stage is recovered; None = it runs no stage processes
    refusal: str = ""  # why it cannot be recovered (recovery NONE): the words every refusal prints
    needs_m_at_least_k: bool = False  # its warm-up forwards K micro-batches before the first backward
    chunks_per_device: int = 1  # > 1: several chunks share a device (a placed schedule: DualPipe-V)
    flushes: bool = True  # every optimizer step drains the pipeline (PipeDream's does not)
    baseline: bool = False  # one of the paper's baselines ZeroLock is measured against
    control: bool = False  # a control of a study (terminal), not a method the dashboard or benchmarks offer
    # --frozen-stages N: its first N stages run forward only (no graph kept, no gradient received); an
    # exact-gradient schedule whose backward simply ends at stage N (zb-h1's split B is not cut there yet)
    freezes_prefix: bool = False

    def __post_init__(self) -> None:
        if (self.recovery is Recovery.NONE) != bool(self.refusal):
            raise ValueError(f"{self.name}: a refusal is given exactly when the method cannot be recovered")
        if not set(self.runtimes) <= set(RUNTIMES):
            raise ValueError(f"{self.name}: runtimes must be among {RUNTIMES} (got {self.runtimes})")
        if (PIPELINE in self.runtimes) != (self.recovery is not None):
            raise ValueError(f"{self.name}: a method the pipeline runs says how it is recovered, and only one")

    @property
    def trains_every_chunk(self) -> bool:
        """Every chunk trains on a local loss of its own (and so reads its hidden state out)."""
        return self.local and not self.last_chunk_only


PIPEDREAM_REFUSAL = ("PipeDream cannot be recovered: its unflushed pipeline keeps several weight versions "
                     "in flight, so no step boundary is a consistent checkpoint of every stage (recovery "
                     "covers zerolock locally and gpipe / 1f1b / zb-h1 by global rollback)")

# the canonical order: ZeroLock, the backprop pipelines, the BP reference, the control (Compare sorts by it)
METHODS: tuple[Method, ...] = (
    Method(name="zerolock", label="ZeroLock", colour="#00695C",  # dark teal
           runtimes=(REFERENCE, PIPELINE), schedule="zerolock", local=True, recovery=Recovery.LOCAL),
    Method(name="gpipe", label="GPipe", colour="#8C510A",  # brown
           runtimes=(PIPELINE,), schedule="gpipe", recovery=Recovery.GLOBAL, baseline=True, freezes_prefix=True),
    Method(name="1f1b", label="1F1B", colour="#880E4F",  # wine
           runtimes=(PIPELINE,), schedule="1f1b", recovery=Recovery.GLOBAL, needs_m_at_least_k=True,
           baseline=True, freezes_prefix=True),
    Method(name="pipedream", label="PipeDream", colour="#827717",  # olive
           runtimes=(PIPELINE,), schedule="pipedream", recovery=Recovery.NONE, refusal=PIPEDREAM_REFUSAL,
           flushes=False, baseline=True, freezes_prefix=True),
    # ocean blue: zero-bubble (1F1B with the weight gradient split off)
    Method(name="zb-h1", label="ZB-H1", colour="#01579B",
           runtimes=(PIPELINE,), schedule="zb-h1", splits_backward=True, recovery=Recovery.GLOBAL,
           needs_m_at_least_k=True),
    # rust red: two chunks per device (the simulator and Explain only)
    Method(name="dualpipe-v", label="DualPipe-V", colour="#962600",
           runtimes=(), schedule="dualpipe-v", splits_backward=True, needs_m_at_least_k=True, chunks_per_device=2),
    Method(name="bp", label="BP reference", colour="#1A237E",  # indigo
           runtimes=(REFERENCE,), schedule=None, freezes_prefix=True),
    # dark violet: only the last chunk trains (the control of `bench depth`), on ZeroLock's schedule
    Method(name="terminal", label="terminal (last chunk only)", colour="#3D0F66",
           runtimes=(REFERENCE, PIPELINE), schedule="zerolock", local=True, last_chunk_only=True,
           recovery=Recovery.LOCAL, control=True),
)
_BY_NAME = {m.name: m for m in METHODS}
assert len(_BY_NAME) == len(METHODS), "a method name is given twice"


def method(name: str) -> Method:
    """The entry of `name` (KeyError naming the known ones otherwise)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown method {name!r}; known: {', '.join(_BY_NAME)}") from None


def names(*, where=lambda m: True) -> tuple[str, ...]:
    """The names of the methods `where(entry)` holds for, in the canonical order."""
    return tuple(m.name for m in METHODS if where(m))


def names_for(runtime: str) -> tuple[str, ...]:
    """The methods `--runtime runtime` takes, in the canonical order."""
    return names(where=lambda m: runtime in m.runtimes)


def _flag(name: str, attribute: str) -> bool:
    entry = _BY_NAME.get(name)
    return bool(entry and getattr(entry, attribute))


# the methods whose chunks train on losses of their own, no gradient crossing a boundary, on ZeroLock's
# schedule (early forwarding): zerolock; terminal, its control, where only the last chunk trains
LOCAL_METHODS = names(where=lambda m: m.local)
# the paper's baselines ZeroLock is measured against (the benchmarks' tables and figures)
BASELINES = names(where=lambda m: m.baseline)
# the methods that take --frozen-stages (their first stages forward only)
FROZEN_PREFIX_METHODS = names(where=lambda m: m.freezes_prefix)


def schedule_of(name: str) -> str:
    """The pipeline schedule a method runs (schedule/builders.py): the local methods run ZeroLock's."""
    entry = _BY_NAME.get(name)
    return entry.schedule if entry and entry.schedule else name


def splits_backward(name: str) -> bool:
    """Whether a method's backward is split into B (input gradient) and a later W (weight gradient): zb-h1."""
    return _flag(name, "splits_backward")


def chunk_trains(name: str, *, last: bool, index: int = 0, frozen_stages: int = 0) -> bool:
    """Whether chunk `index`'s weights train: every chunk's but those of terminal before its last chunk,
    and none of the first `frozen_stages` (--frozen-stages)."""
    return index >= frozen_stages and (last or not _flag(name, "last_chunk_only"))


def every_chunk_trains(name: str) -> bool:
    """zerolock trains every chunk on a local loss of its own; BP and terminal train through the last
    chunk's loss alone (terminal: that chunk only, the others run forward)."""
    return _flag(name, "trains_every_chunk")


def recovers_locally(name: str) -> bool:
    """Whether the pipeline restarts only a failed stage of the method (the others keep training)."""
    entry = _BY_NAME.get(name)
    return bool(entry and entry.recovery is Recovery.LOCAL)


def refusal(name: str) -> str:
    """Why a failure of the method cannot be recovered; "" when it can (or the method is unknown)."""
    entry = _BY_NAME.get(name)
    return entry.refusal if entry else ""


def label(name: str) -> str:
    """The method's label in every view (the name itself for an unknown method)."""
    entry = _BY_NAME.get(name)
    return entry.label if entry else name
