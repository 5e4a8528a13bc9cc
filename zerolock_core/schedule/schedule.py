"""The per-stage action lists of a pipeline schedule, and a unit-step view of them."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from .action import Action, Kind, Message


class Deadlock(ValueError):
    """No stage can make progress although some have actions left.

    ``stuck`` maps each stuck stage to the action it waits on; ``reasons`` says why.
    """

    def __init__(self, waiting: Mapping[int, tuple[Action, str]]) -> None:
        self._waiting = dict(waiting)
        self.stuck: dict[int, Action] = {s: a for s, (a, _) in sorted(waiting.items())}
        self.reasons: dict[int, str] = {s: why for s, (_, why) in sorted(waiting.items())}
        parts = [f"stage {s} waits at {a} ({self.reasons[s]})" for s, a in self.stuck.items()]
        super().__init__("deadlock: " + "; ".join(parts))

    def __reduce__(self):  # picklable across processes (the runtime may ship it)
        return (type(self), (self._waiting,))


def _check_count(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1 (got {value!r})")


@dataclass(kw_only=True, frozen=True)
class Schedule:
    """``actions[d]`` is the ordered list device ``d`` executes literally.

    A device runs one stage (model chunk) unless ``placement`` says otherwise: ``placement[s]`` is the
    device of stage ``s`` (empty = stage ``s`` on device ``s``). DualPipe-V places two chunks on each
    device in a V (stages ``d`` and ``2D - 1 - d`` on device ``d``): hidden states still flow stage
    ``s`` -> ``s + 1``, and a hand-off between two chunks of one device is local (no send, no receive).

    Micro-batch ids are global: window ``w`` covers ``w*m .. w*m + m - 1``.
    """

    method: str
    stages: int
    microbatches: int
    windows: int = 1
    actions: tuple[tuple[Action, ...], ...]
    placement: tuple[int, ...] = ()
    frozen_stages: int = 0  # the first stages forward only: they keep nothing past a forward (--frozen-stages)

    def __post_init__(self) -> None:
        _check_count("stages", self.stages)
        _check_count("microbatches", self.microbatches)
        _check_count("windows", self.windows)
        rows = tuple(tuple(row) for row in self.actions)
        object.__setattr__(self, "actions", rows)
        placement = tuple(self.placement)
        object.__setattr__(self, "placement", placement)
        if not placement and len(rows) != self.stages:
            raise ValueError(f"schedule has {len(rows)} action lists for {self.stages} stages")
        if placement and (len(placement) != self.stages or set(placement) != set(range(len(rows)))):
            raise ValueError(f"placement {placement} must name a device in 0..{len(rows) - 1} for each of the "
                             f"{self.stages} stages, every device holding at least one")
        lane = "device" if placement else "stage"
        for d, row in enumerate(rows):
            for a in row:
                if not isinstance(a, Action):
                    raise ValueError(f"{lane} {d}: expected Action, got {a!r}")
                if a.stage >= self.stages or self.device_of(a.stage) != d:
                    raise ValueError(f"action {a} is listed under {lane} {d}")
                if a.peer is not None and a.peer >= self.stages:
                    raise ValueError(f"action {a} has no peer stage in a {self.stages}-stage pipeline")
                if a.peer is not None and self.device_of(a.peer) == d:
                    raise ValueError(f"action {a}: stages {a.stage} and {a.peer} share device {d}, "
                                     "their hand-off is local (no send or receive)")

    @classmethod
    def from_strings(
        cls,
        rows: Sequence[Sequence[str]],
        *,
        method: str = "custom",
        microbatches: int | None = None,
        windows: int = 1,
    ) -> Schedule:
        """Build from per-stage action strings; ``microbatches`` defaults to (max id + 1) / windows."""
        actions = tuple(tuple(Action.parse(t) for t in row) for row in rows)
        if microbatches is None:
            ids = [a.microbatch for row in actions for a in row if a.microbatch is not None]
            microbatches = max(1, -(-(max(ids, default=0) + 1) // windows))
        return cls(method=method, stages=len(actions), microbatches=microbatches, windows=windows, actions=actions)

    # cached (the actions never change): the analyses ask for every action, and a scan each time made
    # them quadratic in the schedule's length
    @cached_property
    def splits_backward(self) -> bool:
        """Whether the backward is split into B (input gradient) and a later W (weight gradient)."""
        return any(a.kind is Kind.W for row in self.actions for a in row)

    @cached_property
    def release_kinds(self) -> frozenset[Kind]:
        """The actions that free a micro-batch's activations on a stage: its backward (B), or L (zerolock);
        in a split schedule W, which needs the graph that B kept."""
        return frozenset({Kind.W if self.splits_backward else Kind.B, Kind.L})

    @property
    def total_microbatches(self) -> int:
        return self.microbatches * self.windows

    @property
    def devices(self) -> int:
        return len(self.actions)

    def device_of(self, stage: int) -> int:
        """The device that runs ``stage`` (``placement``; the stage itself when there is none)."""
        return self.placement[stage] if self.placement else stage

    def for_stage(self, stage: int) -> tuple[Action, ...]:
        """``stage``'s actions in the order its device runs them."""
        if not isinstance(stage, int) or not 0 <= stage < self.stages:
            raise ValueError(f"stage must be in 0..{self.stages - 1} (got {stage!r})")
        row = self.actions[self.device_of(stage)]
        return tuple(a for a in row if a.stage == stage) if self.placement else row

    def to_strings(self) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(str(a) for a in row) for row in self.actions)

    def steps(self) -> tuple[tuple[Action | None, ...], ...]:
        """Unit-step execution: each row is one time step, each column a device (a stage unless placed).

        Every action takes one step; a receive may run once its send ran in an
        earlier step; sends never block. Raises ``Deadlock`` if the schedule cannot finish.
        """
        pos = [0] * self.devices
        sent_at: dict[Message, deque[int]] = defaultdict(deque)
        rows: list[tuple[Action | None, ...]] = []
        while any(p < len(row) for p, row in zip(pos, self.actions)):
            step = len(rows)
            cells: list[Action | None] = [None] * self.devices
            for s, row in enumerate(self.actions):
                if pos[s] == len(row):
                    continue
                a = row[pos[s]]
                if a.is_recv:
                    queue = sent_at[a.message]
                    if not queue or queue[0] >= step:
                        continue
                    queue.popleft()
                cells[s] = a
                pos[s] += 1
                if a.is_send:
                    sent_at[a.message].append(step)
            if all(c is None for c in cells):
                raise Deadlock(self._waiting(pos, sent_at))
            rows.append(tuple(cells))
        return tuple(rows)

    def _waiting(self, pos: list[int], sent_at: Mapping[Message, deque[int]]) -> dict[int, tuple[Action, str]]:
        waiting = {}
        for s, row in enumerate(self.actions):
            if pos[s] < len(row):
                a = row[pos[s]]
                waiting[s] = (a, f"needs {a.counterpart()}, never sent")
        return waiting

    def grid(self) -> str:
        """Printable step x stage table of the unit-step execution (see ``steps``)."""
        lane = "device" if self.placement else "stage"
        header = ["step"] + [f"{lane} {d}" for d in range(self.devices)]
        body = [[str(t)] + ["" if c is None else str(c) for c in row] for t, row in enumerate(self.steps())]
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
        lines = [" | ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [header, *body]]
        return "\n".join(lines)

    def __str__(self) -> str:
        placed = f" on {self.devices} devices" if self.placement else ""
        title = f"{self.method} schedule: K={self.stages}{placed} m={self.microbatches} windows={self.windows}"
        return f"{title}\n{self.grid()}"
