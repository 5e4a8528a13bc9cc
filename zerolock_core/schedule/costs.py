"""Cost model of the simulator: compute seconds per action kind, and the link."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .action import COMPUTE_KINDS, Kind

StageCosts = Mapping[int, Mapping[str, float]] | Callable[[int, str], float]


def _check_seconds(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ValueError(f"{name} must be a finite number of seconds >= 0 (got {value!r})")


@dataclass(kw_only=True, frozen=True)
class Costs:
    """Seconds per compute action and bytes per transfer.

    ``per_stage`` overrides the defaults: either ``{stage: {"F": 2.0, ...}}`` (kind
    codes; missing entries fall back) or a callable ``(stage, kind_code) -> seconds``.
    Sends and receives cost no compute time; transfers are timed by the ``LinkProfile``.

    ``backward`` ("B") is always a whole backward, so one ``Costs`` times 1F1B and ZB-H1 on the same
    work; ``weight_grad`` ("W") is the part of it a split schedule runs later as W (under LoRA the
    adapters' gradient only). A split schedule's B costs the rest (``split_backward_s``).

    ``speeds`` (one per stage, in (0, 1]; empty = all 1) is uneven hardware, the simulator's
    ``--stage-speed``: every compute cost of a stage is divided by its speed (runtime/pace.py).
    """

    forward: float = 1.0
    local: float = 1.0
    backward: float = 1.0
    weight_grad: float = 0.0
    step: float = 0.0
    ckpt: float = 0.0
    replay: float = 1.0
    hidden_bytes: int = 0
    grad_bytes: int = 0
    per_stage: StageCosts | None = None
    speeds: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("forward", "local", "backward", "weight_grad", "step", "ckpt", "replay"):
            _check_seconds(name, getattr(self, name))
        if self.weight_grad > self.backward:
            raise ValueError(f"weight_grad ({self.weight_grad!r} s) is part of a backward: it cannot exceed "
                             f"backward ({self.backward!r} s)")
        for name in ("hidden_bytes", "grad_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0 (got {value!r})")
        for stage, speed in enumerate(self.speeds):
            if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0 < speed <= 1:
                raise ValueError(f"the speed of stage {stage} must be in (0, 1] (got {speed!r})")
        if self.per_stage is not None and not (callable(self.per_stage) or isinstance(self.per_stage, Mapping)):
            raise ValueError(f"per_stage must be a mapping or a callable (got {type(self.per_stage).__name__})")

    def default_s(self, kind: Kind | str) -> float:
        kind = Kind(kind)
        if kind not in COMPUTE_KINDS:
            raise ValueError(f"{kind} is not a compute action; it has no compute cost")
        return {
            Kind.F: self.forward,
            Kind.L: self.local,
            Kind.B: self.backward,
            Kind.W: self.weight_grad,
            Kind.STEP: self.step,
            Kind.CKPT: self.ckpt,
            Kind.REPLAY: self.replay,
        }[kind]

    def compute_s(self, stage: int, kind: Kind | str, *, device: int | None = None) -> float:
        """Seconds ``stage`` spends on one action of compute ``kind`` at the speed of its ``device`` (the
        stage itself unless a schedule places several stages on one device: ``speeds`` are per device)."""
        kind = Kind(kind)
        default = self.default_s(kind)
        if self.per_stage is None:
            seconds = default
        elif isinstance(self.per_stage, Mapping):
            seconds = self.per_stage.get(stage, {}).get(kind.value, default)
        else:
            seconds = self.per_stage(stage, kind.value)
        _check_seconds(f"cost of {kind} on stage {stage}", seconds)
        return float(seconds) / self.speed_of(stage if device is None else device)

    def speed_of(self, device: int) -> float:
        if not self.speeds:
            return 1.0
        if not 0 <= device < len(self.speeds):
            raise ValueError(f"stage {device} has no speed: {len(self.speeds)} speeds were given, one per stage")
        return float(self.speeds[device])

    def split_backward_s(self, stage: int, *, device: int | None = None) -> tuple[float, float]:
        """(B, W) seconds of a backward split in two on ``stage``: the input gradient and the weight gradient."""
        whole, weight = self.compute_s(stage, Kind.B, device=device), self.compute_s(stage, Kind.W, device=device)
        if weight > whole:
            raise ValueError(f"stage {stage}: W ({weight:g} s) is part of a backward, it cannot exceed B ({whole:g} s)")
        return whole - weight, weight


@dataclass(kw_only=True, frozen=True)
class LinkProfile:
    """One link per direction per hop: ``bytes / bandwidth`` on the wire, plus ``latency_s``."""

    bandwidth_bytes_per_s: float = math.inf
    latency_s: float = 0.0

    def __post_init__(self) -> None:
        bw = self.bandwidth_bytes_per_s
        if isinstance(bw, bool) or not isinstance(bw, (int, float)) or not bw > 0:
            raise ValueError(f"bandwidth_bytes_per_s must be > 0 (inf allowed) (got {bw!r})")
        _check_seconds("latency_s", self.latency_s)

    def wire_s(self, nbytes: int) -> float:
        """Seconds the link is occupied by ``nbytes`` (0 on an infinite link)."""
        return 0.0 if math.isinf(self.bandwidth_bytes_per_s) else nbytes / self.bandwidth_bytes_per_s

    def transfer_s(self, nbytes: int) -> float:
        """Seconds from the start of an uncontended transfer to its arrival."""
        return self.latency_s + self.wire_s(nbytes)

    @classmethod
    def profile(cls, name: str) -> LinkProfile:
        """A named profile from ``LINK_PROFILES``."""
        try:
            return LINK_PROFILES[name]
        except (KeyError, TypeError):
            raise ValueError(f"unknown link profile {name!r}; expected one of: {', '.join(LINK_PROFILES)}") from None


def _mbps(megabits_per_s: float) -> float:
    return megabits_per_s * 1e6 / 8


# Our chosen values: the paper only gives the two ends (local ~1 Gbps, constrained ~50 Mbps / 30 ms);
# "wifi" and "mobile" are interpolated. "ideal" is an infinite, zero-latency link.
LINK_PROFILES: dict[str, LinkProfile] = {
    "ideal": LinkProfile(bandwidth_bytes_per_s=math.inf, latency_s=0.0),
    "local": LinkProfile(bandwidth_bytes_per_s=_mbps(1000), latency_s=0.0),
    "wifi": LinkProfile(bandwidth_bytes_per_s=_mbps(300), latency_s=0.005),
    "mobile": LinkProfile(bandwidth_bytes_per_s=_mbps(100), latency_s=0.015),
    "constrained": LinkProfile(bandwidth_bytes_per_s=_mbps(50), latency_s=0.030),
}
