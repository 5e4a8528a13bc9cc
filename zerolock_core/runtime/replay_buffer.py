"""The replay buffer: hidden states a stage sent downstream, kept for a replacement to replay."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import torch


@dataclass(kw_only=True)
class ReplayBuffer:
    """Hidden states this stage sent downstream, kept until the downstream stage's durable
    checkpoint no longer needs them (or the capacity forces the oldest out)."""
    capacity: int
    entries: "OrderedDict[int, torch.Tensor]" = field(default_factory=OrderedDict)
    floor: int = 0  # the oldest micro-batch still replayable

    def add(self, mb: int, h: torch.Tensor) -> None:
        if mb in self.entries:
            return  # a retried send (after a relink) keeps the first copy: the same tensor
        self.entries[mb] = h
        while len(self.entries) > self.capacity:
            old, _ = self.entries.popitem(last=False)
            self.floor = old + 1

    def prune_below(self, mb: int) -> None:
        while self.entries and next(iter(self.entries)) < mb:
            self.entries.popitem(last=False)
        self.floor = max(self.floor, mb)

    def between(self, first: int, end: int) -> list[tuple[int, torch.Tensor]]:
        """The entries first <= mb < end, in order."""
        return [(mb, h) for mb, h in self.entries.items() if first <= mb < end]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.entries.values())
