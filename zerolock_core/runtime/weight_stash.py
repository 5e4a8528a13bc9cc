"""PipeDream weight stashing: the backward of a micro-batch uses exactly the weight version its
forward used, even if the stage has stepped its optimizer in between.

Each version is a detached snapshot of the trainable parameters (leaf tensors); the forward runs
through `torch.func.functional_call` with the version's tensors, so the autograd graph saved
the snapshot, not the live parameters that the optimizer updates in place. After a backward,
the snapshot's gradients are moved into the live parameters' `.grad` for the next step.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call

from ..telemetry import ActivationMeter


class WeightStash:
    def __init__(self, module: nn.Module, *, meter: ActivationMeter | None = None) -> None:
        self.module = module
        self.meter = meter  # told which storages are weight versions: they are not activations
        self.names = [n for n, p in module.named_parameters() if p.requires_grad]
        self.live = dict(module.named_parameters())
        self.version = 0
        self.versions: dict[int, dict[str, torch.Tensor]] = {}
        self.users: dict[int, set[int]] = {}  # version -> micro-batches whose forward used it
        self.version_of: dict[int, int] = {}  # micro-batch -> version
        self.peak_versions = 0

    def _snapshot(self) -> dict[str, torch.Tensor]:
        snapshot = {n: self.live[n].detach().clone().requires_grad_(True) for n in self.names}
        if self.meter is not None:
            self.meter.exclude(snapshot.values())
        return snapshot

    def forward(self, microbatch: int, *args, **kwargs):
        if self.version not in self.versions:
            self.versions[self.version] = self._snapshot()
            self.users[self.version] = set()
        self.users[self.version].add(microbatch)
        self.version_of[microbatch] = self.version
        self.peak_versions = max(self.peak_versions, len(self.versions))
        return functional_call(self.module, self.versions[self.version], args, kwargs, strict=False)

    def after_backward(self, microbatch: int) -> None:
        v = self.version_of.pop(microbatch)
        params = self.versions[v]
        for n in self.names:
            g = params[n].grad
            if g is not None:
                live = self.live[n]
                live.grad = g.clone() if live.grad is None else live.grad.add_(g)
                params[n].grad = None
        self.users[v].discard(microbatch)
        self._free_unused()

    def stepped(self) -> None:
        """Call after the optimizer step: later forwards use a new version."""
        self.version += 1
        self._free_unused()

    def _free_unused(self) -> None:
        for v in [v for v, u in self.users.items() if not u and v != self.version]:
            if self.meter is not None:
                self.meter.forget(self.versions[v].values())
            del self.versions[v], self.users[v]
