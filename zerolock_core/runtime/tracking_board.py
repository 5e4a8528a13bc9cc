"""A pipeline's board for `--readout track:P` (method/tracking.py): the last stage's adapters in the
coordinator's store, one key per version (protocol.tracked_adapters), as a safetensors file's bytes."""
from __future__ import annotations

from . import protocol

WAIT_S = 600.0  # a stage before the last waits this long for a version (the last stage may be recovering)


class StoreBoard:
    """A pipeline's board: the coordinator's store (multi-host too); versions are never deleted, so a
    replaced stage replaying old steps finds the versions it needs."""

    def __init__(self, store, *, timeout_s: float = WAIT_S) -> None:
        self.store, self.timeout_s = store, timeout_s

    def put(self, version: int, payload: bytes) -> None:
        self.store.set(protocol.tracked_adapters(version), payload)

    def get(self, version: int) -> bytes:
        return protocol.wait_for_bytes(self.store, protocol.tracked_adapters(version), timeout_s=self.timeout_s,
                                       what=f"the last stage's adapters after step {version} (--readout track)")
