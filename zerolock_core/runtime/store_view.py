"""The coordinator's client of its own rendezvous store, with a memory: every value read is kept, so
that once the run has ended and the store is gone, `get` answers what was seen last (status() of an
ended run still knows each stage's step and state)."""
from __future__ import annotations

from typing import Any, Callable

import torch.distributed as dist


class StoreView:
    def __init__(self, store: dist.TCPStore) -> None:
        self._store: dist.TCPStore | None = store
        self.port = store.port
        self._last: dict[str, Any] = {}

    def get(self, key: str, default: Any, cast: Callable[[str], Any]) -> Any:
        store = self._store
        if store is None:  # the store went away with the run: what we saw last
            return self._last.get(key, default)
        try:
            if not store.check([key]):
                return default  # absent now (some keys are deleted once handled): not what it was
            value = self._last[key] = cast(store.get(key).decode())
            return value
        except Exception:  # a transient store error: the caller's default, the next tick asks again
            return default

    def set(self, key: str, value: str) -> None:
        if self._store is not None:
            self._store.set(key, value)

    def delete(self, key: str) -> None:
        if self._store is not None and self._store.check([key]):
            self._store.delete_key(key)

    @property
    def raw(self) -> dist.TCPStore:
        """The store itself, for code that takes a `dist.Store` (the recovery book)."""
        assert self._store is not None, "the store is closed"
        return self._store

    def close(self) -> None:
        """Forget the store (its server goes with the last reference); reads answer from memory."""
        self._store = None
