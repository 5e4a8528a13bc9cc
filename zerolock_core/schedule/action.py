"""Pipeline actions and their compact string form ("1F3" = stage 1, forward, micro-batch 3).

Pure Python (no torch): the runtime dispatches on ``Action.kind``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..vocabulary import Category, Kind, category

# what a schedule is made of: the lane kinds a stage is told to do (recovery, waits and start-up are
# recorded, never scheduled)
SCHEDULE_KINDS: tuple[Kind, ...] = (Kind.F, Kind.SF, Kind.RF, Kind.L, Kind.B, Kind.W, Kind.SB, Kind.RB, Kind.STEP,
                                    Kind.CKPT, Kind.REPLAY)
# what each kind counts as is defined once, in the telemetry vocabulary
COMPUTE_KINDS = frozenset(k for k in SCHEDULE_KINDS if category(k) == Category.COMPUTE)
SEND_KINDS = frozenset(k for k in SCHEDULE_KINDS if category(k) == Category.COMMUNICATION)
RECV_KINDS = frozenset(k for k in SCHEDULE_KINDS if category(k) == Category.WAIT)
NO_MICROBATCH_KINDS = frozenset({Kind.STEP, Kind.CKPT})
# receive kind -> the send kind it matches
SEND_FOR_RECV = {Kind.RF: Kind.SF, Kind.RB: Kind.SB}
# comm kind -> stage offset of the peer
_PEER_OFFSET = {Kind.SF: +1, Kind.RF: -1, Kind.SB: -1, Kind.RB: +1}

_NUM = r"(0|[1-9][0-9]*)"
# longest codes first so "SF" is not read as "S" + "F"
_CODES = "|".join(sorted((k.value for k in SCHEDULE_KINDS), key=len, reverse=True))
_PATTERN = re.compile(rf"{_NUM}({_CODES}){_NUM}?")

# A message on the wire: (send kind, source stage, destination stage, micro-batch).
Message = tuple[Kind, int, int, int]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(kw_only=True, frozen=True, repr=False)
class Action:
    """One step of one stage: ``Action(stage=1, kind=Kind.F, microbatch=3)`` is ``"1F3"``."""

    stage: int
    kind: Kind
    microbatch: int | None = None

    def __post_init__(self) -> None:
        if not _is_int(self.stage) or self.stage < 0:
            raise ValueError(f"action stage must be an int >= 0 (got {self.stage!r})")
        if self.kind not in SCHEDULE_KINDS:  # a string, or a lane kind no schedule has (RESTORE ...)
            codes = ", ".join(k.value for k in SCHEDULE_KINDS)
            raise ValueError(f"unknown action kind {self.kind!r}; expected one of: {codes}")
        object.__setattr__(self, "kind", Kind(self.kind))
        if self.kind in NO_MICROBATCH_KINDS:
            if self.microbatch is not None:
                raise ValueError(f"{self.kind} takes no micro-batch (got {self.microbatch!r})")
        elif not _is_int(self.microbatch) or self.microbatch < 0:
            raise ValueError(f"{self.kind} needs a micro-batch int >= 0 (got {self.microbatch!r})")
        if self.kind in _PEER_OFFSET and self.stage + _PEER_OFFSET[self.kind] < 0:
            raise ValueError(f"{self.kind} on stage 0 has no peer stage")

    @classmethod
    def parse(cls, text: str) -> Action:
        """Parse ``"1F3"``, ``"0SF2"``, ``"0STEP"`` ...; ValueError naming the string if bad."""
        if not isinstance(text, str):
            raise ValueError(f"action string expected, got {text!r}")
        match = _PATTERN.fullmatch(text)
        if match is None:
            raise ValueError(f"bad action string {text!r}: expected <stage><kind>[<microbatch>], e.g. '1F3'")
        stage, code, micro = match.groups()
        try:
            return cls(stage=int(stage), kind=Kind(code), microbatch=None if micro is None else int(micro))
        except ValueError as err:
            raise ValueError(f"bad action string {text!r}: {err}") from None

    def __str__(self) -> str:
        micro = "" if self.microbatch is None else str(self.microbatch)
        return f"{self.stage}{self.kind.value}{micro}"

    def __repr__(self) -> str:
        return str(self)

    @property
    def is_compute(self) -> bool:
        return self.kind in COMPUTE_KINDS

    @property
    def is_send(self) -> bool:
        return self.kind in SEND_KINDS

    @property
    def is_recv(self) -> bool:
        return self.kind in RECV_KINDS

    @property
    def peer(self) -> int | None:
        """The other stage of a send/receive (None for compute actions)."""
        offset = _PEER_OFFSET.get(self.kind)
        return None if offset is None else self.stage + offset

    @property
    def message(self) -> Message | None:
        """The message a send emits or a receive waits for (None for compute actions)."""
        if self.is_send:
            return (self.kind, self.stage, self.stage + _PEER_OFFSET[self.kind], self.microbatch)
        if self.is_recv:
            src = self.stage + _PEER_OFFSET[self.kind]
            return (SEND_FOR_RECV[self.kind], src, self.stage, self.microbatch)
        return None

    def counterpart(self) -> Action:
        """The matching receive of a send, or the matching send of a receive."""
        msg = self.message
        if msg is None:
            raise ValueError(f"{self} is a compute action and has no counterpart")
        send_kind, src, dst, micro = msg
        if self.is_send:
            recv_kind = next(r for r, s in SEND_FOR_RECV.items() if s == send_kind)
            return Action(stage=dst, kind=recv_kind, microbatch=micro)
        return Action(stage=src, kind=send_kind, microbatch=micro)

