"""The telemetry vocabulary: every kind of bar that appears on a stage's lane, and what it counts as.

One table for the runtime (the event files, metrics.json), the schedules, the dashboard and the
benchmarks: a lane kind is a `Kind`, never a string literal. A stage is **busy** during compute (its
training work, replayed micro-batches included); communication, waits, recovery (restoring a
checkpoint, rebuilding a link) and start-up are not busy: busy / span is the active fraction,
1 − mean busy / makespan the bubble. Pure Python: the schedule simulator and the app import it
without torch.
"""
from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    """What a lane shows. The value is the code in the event files and in action strings ("1F3"); a
    schedule is made of the first eleven (schedule.action.SCHEDULE_KINDS), the rest are recorded only."""

    F = "F"  # forward of a micro-batch
    SF = "SF"  # send the hidden state downstream
    RF = "RF"  # wait for the hidden state from upstream
    L = "L"  # ZeroLock local step: frozen-head readout + local loss + local backward
    B = "B"  # backward (BP methods; the last stage's B includes its loss). Where W follows: the input gradient only
    W = "W"  # weight gradient of a split backward (zb-h1): what no other stage waits for, run later
    SB = "SB"  # send the gradient upstream
    RB = "RB"  # wait for the gradient from downstream
    STEP = "STEP"  # optimizer step
    CKPT = "CKPT"  # checkpoint write
    REPLAY = "REPLAY"  # a forward replayed after a recovery
    RESTORE = "RESTORE"  # load a checkpoint (a restarted stage)
    RELINK = "RELINK"  # rebuild a link to a restarted neighbour, resend what it lost
    WAIT = "WAIT"  # any other wait
    STARTUP = "STARTUP"  # a stage process from spawn to its first action (telemetry/lifecycle.py)


class Category(StrEnum):
    COMPUTE = "compute"
    COMMUNICATION = "communication"
    WAIT = "wait"
    RECOVERY = "recovery"
    LIFECYCLE = "lifecycle"


KIND_CATEGORY: dict[Kind, Category] = {
    Kind.F: Category.COMPUTE,
    Kind.L: Category.COMPUTE,
    Kind.B: Category.COMPUTE,
    Kind.W: Category.COMPUTE,
    Kind.STEP: Category.COMPUTE,
    Kind.CKPT: Category.COMPUTE,
    Kind.REPLAY: Category.COMPUTE,
    Kind.SF: Category.COMMUNICATION,
    Kind.SB: Category.COMMUNICATION,
    Kind.RF: Category.WAIT,
    Kind.RB: Category.WAIT,
    Kind.WAIT: Category.WAIT,
    Kind.RESTORE: Category.RECOVERY,
    Kind.RELINK: Category.RECOVERY,
    Kind.STARTUP: Category.LIFECYCLE,
}


def category(kind: str) -> Category | None:
    """None for a kind this table does not know (a newer engine's)."""
    return KIND_CATEGORY.get(kind)


def kinds_in(cat: Category) -> frozenset[Kind]:
    return frozenset(k for k, c in KIND_CATEGORY.items() if c == cat)


BUSY_KINDS = kinds_in(Category.COMPUTE)


def is_busy(kind: str) -> bool:
    return kind in BUSY_KINDS


# ---- failure modes: one word each, in every view ----------------------------------------------------
STRAGGLER = "slow"  # the one mode that fails nothing: the stage's compute turns slower (runtime/pace.py)
STRAGGLER_FACTOR = 3.0  # how much slower, where no factor is given (`slow`, not `slow=X`)
# The keys are the modes of the recovery records (config.FAILURE_MODES, the codes `--fail 1@500:stop`
# takes, plus "crash": a failure nobody injected); the values are what every view calls them.
FAILURE_WORDS: dict[str, str] = {"kill": "kill", "stop": "hang", "post-step": "kill after step",
                                 "mid-ckpt": "kill in checkpoint", "slow": "straggler", "crash": "crash"}
# How an injected mode fails the stage, said beside its word where a failure is chosen.
FAILURE_HOW: dict[str, str] = {"kill": "SIGKILL", "stop": "SIGSTOP", "post-step": "right after its optimizer step",
                               "mid-ckpt": "while writing its checkpoint",
                               STRAGGLER: f"its compute {STRAGGLER_FACTOR:g}x slower from its next step on, "
                                          f"nothing fails"}


def failure_word(mode: str | None) -> str:
    """The word of a failure mode ("stop" -> "hang"); an unknown mode as it is."""
    return FAILURE_WORDS.get(mode or "", mode or "failure")


def failure_choice(mode: str) -> str:
    """A mode where one is chosen: its word and how it fails ("hang (SIGSTOP: frozen, ...)")."""
    return f"{failure_word(mode)} ({FAILURE_HOW[mode]})" if mode in FAILURE_HOW else failure_word(mode)
