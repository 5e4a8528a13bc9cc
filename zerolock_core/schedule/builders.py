"""Schedule builders: zerolock, gpipe, 1f1b and pipedream.

Conventions (per stage ``s`` of ``K``, ``m`` micro-batches per window):

* forward unit  = ``RF i`` (if s > 0), ``F i``, ``SF i`` (if s < K-1)
* backward unit = ``RB i`` (if s < K-1), ``B i``, ``SB i`` (if s > 0)
* ``zerolock``: forward unit then ``L i`` (send before the local step: early
  forwarding); ``STEP`` after each window. No B/SB/RB.
* ``gpipe``: per window all forward units, then backward units i = 0..m-1, ``STEP``.
* ``1f1b`` (non-interleaved, PipeDream-Flush / Megatron order): per window, stage s
  runs ``w = K-s-1`` warm-up forward units, then ``m-w`` pairs (forward unit of
  micro-batch ``w+j``, backward unit of ``j``), then ``w`` cool-down backward units,
  then ``STEP`` (flush). At most ``w+1 = K-s`` micro-batches are alive at once.
* ``pipedream``: the same 1F1B order, but over all ``m*windows`` micro-batches
  with no flush; ``STEP`` right after the backward unit of each window's last
  micro-batch, so forwards of the next window run before earlier backwards finish.

With ``checkpoint_every=n > 0`` a ``CKPT`` follows the ``STEP`` of every n-th window.
"""

from __future__ import annotations

from collections.abc import Callable

from .action import Action, Kind
from .schedule import Schedule

METHODS = ("zerolock", "gpipe", "1f1b", "pipedream")


def _forward_unit(s: int, stages: int, i: int) -> list[Action]:
    unit = [Action(stage=s, kind=Kind.RF, microbatch=i)] if s > 0 else []
    unit.append(Action(stage=s, kind=Kind.F, microbatch=i))
    if s < stages - 1:
        unit.append(Action(stage=s, kind=Kind.SF, microbatch=i))
    return unit


def _backward_unit(s: int, stages: int, i: int) -> list[Action]:
    unit = [Action(stage=s, kind=Kind.RB, microbatch=i)] if s < stages - 1 else []
    unit.append(Action(stage=s, kind=Kind.B, microbatch=i))
    if s > 0:
        unit.append(Action(stage=s, kind=Kind.SB, microbatch=i))
    return unit


class _Builder:
    def __init__(self, stages: int, microbatches: int, windows: int, checkpoint_every: int) -> None:
        self.stages, self.m, self.windows, self.ckpt = stages, microbatches, windows, checkpoint_every

    def window_end(self, s: int, i: int) -> list[Action]:
        """STEP (+ CKPT) after micro-batch ``i`` if it closes a window, else nothing."""
        if (i + 1) % self.m:
            return []
        out = [Action(stage=s, kind=Kind.STEP)]
        if self.ckpt and ((i + 1) // self.m) % self.ckpt == 0:
            out.append(Action(stage=s, kind=Kind.CKPT))
        return out

    def window(self, w: int) -> range:
        return range(w * self.m, (w + 1) * self.m)

    def zerolock(self, s: int) -> list[Action]:
        out: list[Action] = []
        for i in range(self.m * self.windows):
            out += _forward_unit(s, self.stages, i)
            out.append(Action(stage=s, kind=Kind.L, microbatch=i))
            out += self.window_end(s, i)
        return out

    def gpipe(self, s: int) -> list[Action]:
        out: list[Action] = []
        for w in range(self.windows):
            for i in self.window(w):
                out += _forward_unit(s, self.stages, i)
            for i in self.window(w):
                out += _backward_unit(s, self.stages, i) + self.window_end(s, i)
        return out

    def one_f_one_b(self, s: int, ids: range, after_backward: Callable[[int], list[Action]]) -> list[Action]:
        warm = min(self.stages - s - 1, len(ids))
        out: list[Action] = []
        for i in ids[:warm]:
            out += _forward_unit(s, self.stages, i)
        for j in range(len(ids) - warm):
            out += _forward_unit(s, self.stages, ids[warm + j])
            out += _backward_unit(s, self.stages, ids[j]) + after_backward(ids[j])
        for i in ids[len(ids) - warm :]:
            out += _backward_unit(s, self.stages, i) + after_backward(i)
        return out

    def flushed_1f1b(self, s: int) -> list[Action]:
        out: list[Action] = []
        for w in range(self.windows):
            out += self.one_f_one_b(s, self.window(w), lambda i: self.window_end(s, i))
        return out

    def pipedream(self, s: int) -> list[Action]:
        return self.one_f_one_b(s, range(self.m * self.windows), lambda i: self.window_end(s, i))


def schedulable(method: str, *, stages: int, microbatches: int) -> bool:
    """Whether `method` has a schedule for K stages and m micro-batches: 1F1B needs m >= K."""
    return not (method == "1f1b" and microbatches < stages)


def build_schedule(
    method: str, *, stages: int, microbatches: int, windows: int = 1, checkpoint_every: int = 0
) -> Schedule:
    """Build the per-stage action lists of ``method`` (see module docstring)."""
    if not isinstance(method, str) or method.lower() not in METHODS:
        raise ValueError(f"unknown schedule method {method!r}; expected one of: {', '.join(METHODS)}")
    method = method.lower()
    for name, value, low in (("stages", stages, 1), ("microbatches", microbatches, 1), ("windows", windows, 1),
                             ("checkpoint_every", checkpoint_every, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an int >= {low} (got {value!r})")
    if not schedulable(method, stages=stages, microbatches=microbatches):
        raise ValueError(f"1f1b needs microbatches >= stages (got m={microbatches}, K={stages})")
    builder = _Builder(stages, microbatches, windows, checkpoint_every)
    per_stage = {
        "zerolock": builder.zerolock,
        "gpipe": builder.gpipe,
        "1f1b": builder.flushed_1f1b,
        "pipedream": builder.pipedream,
    }[method]
    actions = tuple(tuple(per_stage(s)) for s in range(stages))
    return Schedule(method=method, stages=stages, microbatches=microbatches, windows=windows, actions=actions)
