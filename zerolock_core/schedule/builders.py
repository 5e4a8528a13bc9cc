"""Schedule builders: zerolock, gpipe, 1f1b, pipedream and zb-h1 (one stage per device: the runtime runs
them), and dualpipe-v (two stages per device: the simulator and the Explain tab only).

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

* ``dualpipe-v`` (DeepSeek's DualPipe in a V, as torch.distributed.pipelining's ScheduleDualPipeV):
  ``stages=D`` devices hold ``2D`` chunks, device d the chunks d and 2D-1-d; see dualpipe_v.py.

With ``checkpoint_every=n > 0`` a ``CKPT`` follows the ``STEP`` of every n-th window.

With ``frozen_stages=N > 0`` (gpipe, 1f1b, pipedream: ``--frozen-stages``) the first N stages run no
backward (no RB, B, SB) and stage N sends no gradient (no SB): the same order with those actions left out,
so a frozen stage forwards as fast as its downstream takes the hidden states.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..methods import FROZEN_PREFIX_METHODS
from ..methods import METHODS as _REGISTRY
from .action import Action, Kind
from .dualpipe_v import DUALPIPE_V, dualpipe_v_placement, dualpipe_v_window
from .schedule import Schedule

# the methods with a schedule of their own (methods.py; terminal runs ZeroLock's), in the registry's order
_OWN = tuple(m for m in _REGISTRY if m.schedule == m.name)
# one stage per device: what the runtime runs (a process per stage)
METHODS = tuple(m.name for m in _OWN if m.chunks_per_device == 1)
# several stages per device: schedule data, the simulator and Explain only
PLACED_METHODS = tuple(m.name for m in _OWN if m.chunks_per_device > 1)
# micro-batches per stage a method's warm-up needs (m >= K for 1F1B and ZB-H1, 2K for DualPipe-V); 0: none
_WARM_UP = {m.name: m.chunks_per_device if m.needs_m_at_least_k else 0 for m in _REGISTRY}


def _forward_unit(s: int, stages: int, i: int) -> Iterator[Action]:
    if s > 0:
        yield Action(stage=s, kind=Kind.RF, microbatch=i)
    yield Action(stage=s, kind=Kind.F, microbatch=i)
    if s < stages - 1:
        yield Action(stage=s, kind=Kind.SF, microbatch=i)


def _backward_unit(s: int, stages: int, i: int) -> Iterator[Action]:
    if s < stages - 1:
        yield Action(stage=s, kind=Kind.RB, microbatch=i)
    yield Action(stage=s, kind=Kind.B, microbatch=i)
    if s > 0:
        yield Action(stage=s, kind=Kind.SB, microbatch=i)


_BACKWARD = frozenset({Kind.RB, Kind.B, Kind.SB, Kind.W})


def _cut_at_frozen(actions: Iterator[Action], *, stage: int, frozen_stages: int) -> Iterator[Action]:
    """A stage's actions without the backward that --frozen-stages leaves out (module docstring)."""
    if stage < frozen_stages:
        dropped = _BACKWARD
    elif stage == frozen_stages > 0:
        dropped = frozenset({Kind.SB})
    else:
        return actions
    return (a for a in actions if a.kind not in dropped)


class _Builder:
    """Each method yields one stage's actions in order, one at a time: a runtime stage reads them as it
    goes, so a run of any length costs the memory of a few actions (`iter_stage_actions`)."""

    def __init__(self, stages: int, microbatches: int, windows: int, checkpoint_every: int) -> None:
        self.stages, self.m, self.windows, self.ckpt = stages, microbatches, windows, checkpoint_every

    def window_end(self, s: int, i: int) -> Iterator[Action]:
        """STEP (+ CKPT) after micro-batch ``i`` if it closes a window, else nothing."""
        if (i + 1) % self.m:
            return
        yield Action(stage=s, kind=Kind.STEP)
        if self.ckpt and ((i + 1) // self.m) % self.ckpt == 0:
            yield Action(stage=s, kind=Kind.CKPT)

    def window(self, w: int) -> range:
        return range(w * self.m, (w + 1) * self.m)

    def zerolock(self, s: int) -> Iterator[Action]:
        for i in range(self.m * self.windows):
            yield from _forward_unit(s, self.stages, i)
            yield Action(stage=s, kind=Kind.L, microbatch=i)
            yield from self.window_end(s, i)

    def gpipe(self, s: int) -> Iterator[Action]:
        for w in range(self.windows):
            for i in self.window(w):
                yield from _forward_unit(s, self.stages, i)
            for i in self.window(w):
                yield from _backward_unit(s, self.stages, i)
                yield from self.window_end(s, i)

    def one_f_one_b(self, s: int, ids: range,
                    backward: Callable[[int], Iterator[Action]] | None = None) -> Iterator[Action]:
        """1F1B over `ids`; `backward(j)` yields the backward of ``ids[j]`` (default: the backward unit)."""
        backward = backward or (lambda j: _backward_unit(s, self.stages, ids[j]))
        warm = min(self.stages - s - 1, len(ids))
        for i in ids[:warm]:
            yield from _forward_unit(s, self.stages, i)
        for j in range(len(ids) - warm):
            yield from _forward_unit(s, self.stages, ids[warm + j])
            yield from backward(j)
            yield from self.window_end(s, ids[j])
        for j in range(len(ids) - warm, len(ids)):
            yield from backward(j)
            yield from self.window_end(s, ids[j])

    def flushed_1f1b(self, s: int) -> Iterator[Action]:
        for w in range(self.windows):
            yield from self.one_f_one_b(s, self.window(w))

    def pipedream(self, s: int) -> Iterator[Action]:
        yield from self.one_f_one_b(s, range(self.m * self.windows))

    def zb_h1(self, s: int) -> Iterator[Action]:
        for w in range(self.windows):
            ids = self.window(w)
            yield from self.one_f_one_b(s, ids, backward=lambda j, ids=ids: self.split_backward(s, ids, j))

    def split_backward(self, s: int, ids: range, j: int) -> Iterator[Action]:
        """B of ``ids[j]``, then the W that lags it by s micro-batches (after the window's last B: every W
        left, so the window's weight gradients are whole before its STEP)."""
        yield from _backward_unit(s, self.stages, ids[j])
        last = j == len(ids) - 1
        for k in range(max(0, j - s), j + 1 if last else j - s + 1):
            yield Action(stage=s, kind=Kind.W, microbatch=ids[k])

    def dualpipe_v(self, d: int) -> Iterator[Action]:
        """Device ``d``'s actions (``self.stages`` is the number of devices; 2x as many chunks)."""
        placement = dualpipe_v_placement(self.stages)
        for w in range(self.windows):
            for stage, kind, j in dualpipe_v_window(self.stages, self.m, d):
                i = w * self.m + j
                if kind is Kind.F:
                    yield from _placed_unit(placement, stage, i, before=Kind.RF, after=Kind.SF, down=True)
                elif kind is Kind.B:
                    yield from _placed_unit(placement, stage, i, before=Kind.RB, after=Kind.SB, down=False)
                else:
                    yield Action(stage=stage, kind=kind, microbatch=i)
            # one STEP per device for both its chunks, listed under its first (stage d is on device d)
            yield from self.window_end(d, (w + 1) * self.m - 1)

    def for_method(self, method: str) -> Callable[[int], Iterator[Action]]:
        return {"zerolock": self.zerolock, "gpipe": self.gpipe, "1f1b": self.flushed_1f1b,
                "pipedream": self.pipedream, "zb-h1": self.zb_h1, DUALPIPE_V: self.dualpipe_v}[method]


def _placed_unit(placement: tuple[int, ...], stage: int, i: int, *, before: Kind, after: Kind,
                 down: bool) -> Iterator[Action]:
    """A forward (``down``: receive from stage - 1, send to stage + 1) or backward unit of a placed stage:
    no receive or send where the neighbouring stage is on the same device (a local hand-off)."""
    device, last = placement[stage], len(placement) - 1
    source, target = (stage - 1, stage + 1) if down else (stage + 1, stage - 1)
    if 0 <= source <= last and placement[source] != device:
        yield Action(stage=stage, kind=before, microbatch=i)
    yield Action(stage=stage, kind=Kind.F if down else Kind.B, microbatch=i)
    if 0 <= target <= last and placement[target] != device:
        yield Action(stage=stage, kind=after, microbatch=i)


def min_microbatches(method: str, *, stages: int) -> int:
    """The fewest micro-batches `method` has a schedule for: K for 1F1B and ZB-H1 (their warm-up), 2K for
    DualPipe-V on K devices (2K chunks), 1 otherwise."""
    return max(1, _WARM_UP.get(method, 0) * stages)


def schedulable(method: str, *, stages: int, microbatches: int) -> bool:
    """Whether `method` has a schedule for K stages (devices for dualpipe-v) and m micro-batches."""
    return microbatches >= min_microbatches(method, stages=stages)


def _checked(method: str, *, stages: int, microbatches: int, windows: int, checkpoint_every: int,
             frozen_stages: int = 0) -> str:
    known = METHODS + PLACED_METHODS
    if not isinstance(method, str) or method.lower() not in known:
        raise ValueError(f"unknown schedule method {method!r}; expected one of: {', '.join(known)}")
    for name, value, low in (("stages", stages, 1), ("microbatches", microbatches, 1), ("windows", windows, 1),
                             ("checkpoint_every", checkpoint_every, 0), ("frozen_stages", frozen_stages, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an int >= {low} (got {value!r})")
    if frozen_stages and (frozen_stages >= stages or method.lower() not in FROZEN_PREFIX_METHODS):
        raise ValueError(f"frozen_stages={frozen_stages} needs a stage left to train (< {stages}) and one of "
                         f"{', '.join(m for m in FROZEN_PREFIX_METHODS if m in METHODS)} (got {method.lower()})")
    if not schedulable(method.lower(), stages=stages, microbatches=microbatches):
        need = "2 x devices" if method.lower() == DUALPIPE_V else "stages"
        raise ValueError(f"{method.lower()} needs microbatches >= {need} (got m={microbatches}, K={stages})")
    return method.lower()


def iter_stage_actions(method: str, *, stage: int, stages: int, microbatches: int, windows: int = 1,
                       checkpoint_every: int = 0, frozen_stages: int = 0) -> Iterator[Action]:
    """Stage `stage`'s actions of ``build_schedule(...)``, made as they are read (nothing is built ahead)."""
    method = _checked(method, stages=stages, microbatches=microbatches, windows=windows,
                      checkpoint_every=checkpoint_every, frozen_stages=frozen_stages)
    if method in PLACED_METHODS:
        raise ValueError(f"{method} places two chunks on each device; the runtime runs one stage per process: "
                         "it is schedule data for the simulator and the Explain tab only")
    if not isinstance(stage, int) or not 0 <= stage < stages:
        raise ValueError(f"stage must be in 0..{stages - 1} (got {stage!r})")
    actions = _Builder(stages, microbatches, windows, checkpoint_every).for_method(method)(stage)
    return _cut_at_frozen(actions, stage=stage, frozen_stages=frozen_stages)


def build_schedule(
    method: str, *, stages: int, microbatches: int, windows: int = 1, checkpoint_every: int = 0,
    frozen_stages: int = 0
) -> Schedule:
    """Build the per-device action lists of ``method`` (see module docstring); for dualpipe-v ``stages`` is the
    number of devices and the schedule has twice as many stages (chunks)."""
    method = _checked(method, stages=stages, microbatches=microbatches, windows=windows,
                      checkpoint_every=checkpoint_every, frozen_stages=frozen_stages)
    per_device = _Builder(stages, microbatches, windows, checkpoint_every).for_method(method)
    actions = tuple(tuple(_cut_at_frozen(per_device(d), stage=d, frozen_stages=frozen_stages))
                    for d in range(stages))
    placement = dualpipe_v_placement(stages) if method == DUALPIPE_V else ()
    return Schedule(method=method, stages=len(placement) or stages, microbatches=microbatches, windows=windows,
                    actions=actions, placement=placement, frozen_stages=frozen_stages)
