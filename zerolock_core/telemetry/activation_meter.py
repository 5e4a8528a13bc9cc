"""Activation memory, measured: the bytes autograd saves for backward.

A `saved_tensors_hooks` pack hook wraps every saved tensor in a token; the bytes of its storage
are counted while any token for that storage is alive (each storage once), and released when
autograd drops the last one (after backward, or when the graph is freed). Tensors that are, or
share storage with, parameters and buffers are not activations (every matmul saves its weight,
and a frozen LM head is saved by every readout) and are not counted.
"""
from __future__ import annotations

import contextlib
from typing import Iterable, Iterator

import torch


class _Saved:
    __slots__ = ("meter", "key", "tensor")

    def __init__(self, meter: "ActivationMeter", key: int, tensor: torch.Tensor) -> None:
        self.meter, self.key, self.tensor = meter, key, tensor

    def __del__(self) -> None:
        self.meter._release(self.key)


class ActivationMeter:
    def __init__(self, tensors_not_counted: Iterable[torch.Tensor] = ()) -> None:
        self._excluded: set[int] = set()
        self.exclude(tensors_not_counted)
        self._live: dict[int, list[int]] = {}  # storage key -> [nbytes, tokens alive]
        self.current_bytes = 0
        self.peak_bytes = 0

    def exclude(self, tensors: Iterable[torch.Tensor]) -> None:
        """Parameters, buffers, stashed weight versions: storages that are not activations."""
        for t in tensors:
            self._excluded.add(t.untyped_storage().data_ptr())

    def forget(self, tensors: Iterable[torch.Tensor]) -> None:
        for t in tensors:
            self._excluded.discard(t.untyped_storage().data_ptr())

    @contextlib.contextmanager
    def measuring(self) -> Iterator[None]:
        with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
            yield

    def reset_peak(self) -> None:
        self.peak_bytes = self.current_bytes

    def _pack(self, t: torch.Tensor):
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key == 0 or key in self._excluded:
            return t
        entry = self._live.get(key)
        if entry is None:
            entry = self._live[key] = [storage.nbytes(), 0]
            self.current_bytes += entry[0]
            self.peak_bytes = max(self.peak_bytes, self.current_bytes)
        entry[1] += 1
        # detach: holding an output tensor itself (with its grad_fn) would make a reference cycle
        # through the C++ graph that keeps the whole graph alive
        return _Saved(self, key, t.detach())

    @staticmethod
    def _unpack(packed):
        return packed.tensor if isinstance(packed, _Saved) else packed

    def _release(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current_bytes -= entry[0]
            del self._live[key]
