"""Idempotent sends: a (kind, micro-batch) goes out at most once on one generation of a link.

A send that raised may or may not have reached the wire, and after a link is rebuilt the upstream
end resends from its replay buffer; retrying the action that raised must then not send the same
micro-batch a second time (the receiver posts one receive per tag: a second copy is never taken,
and the sender's next wait on it blocks). Sends on a link go out in micro-batch order, so a high
water mark per (generation, kind) is the whole ledger.
"""
from __future__ import annotations


class SendLedger:
    def __init__(self) -> None:
        self._upto: dict[tuple[int, int], int] = {}  # (link generation, kind) -> highest micro-batch sent

    def already_sent(self, generation: int, kind: int, microbatch: int) -> bool:
        return self._upto.get((generation, kind), -1) >= microbatch

    def record(self, generation: int, kind: int, microbatch: int) -> None:
        key = (generation, kind)
        assert microbatch > self._upto.get(key, -1), f"send {microbatch} out of order on {key}"
        self._upto[key] = microbatch
