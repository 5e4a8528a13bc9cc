"""Uneven hardware on one machine: a stage computes as if on a slower device.

`--stage-speed 1,0.4,1` gives each stage a speed in (0, 1]; a straggler (`--fail 1@20:slow=3`) makes a
stage's compute `factor` times slower from a step on. Both stretch every compute action the same way
(`Executor.run` calls `stretch` once per action, on the compute kinds of vocabulary.py): after the real
compute of d ns the stage waits d·(1/speed · straggle − 1) more, measured from the action's own duration,
inside the action — so its event's bar is longer, busy time grows by the factor, and nothing the action
computed changes (the weights stay bitwise those of an even run).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


@dataclass(kw_only=True)
class Pace:
    speed: float = 1.0  # --stage-speed of this stage
    straggler: Callable[[int], float] | None = None  # steps done -> a straggler's factor (FaultInjection.straggle)
    straggle: float = 1.0  # that factor, as of the last step

    def at_step(self, steps_done: int) -> None:
        if self.straggler is not None:
            self.straggle = self.straggler(steps_done)

    def __post_init__(self) -> None:
        assert 0 < self.speed <= 1, self.speed  # the config refuses anything else

    @property
    def factor(self) -> float:
        """How many times longer a compute action takes than it really did."""
        return self.straggle / self.speed

    def stretch(self, t0: int, t1: int) -> tuple[int, int]:
        """(the action's new end, the ns waited) for an action that really computed from t0 to t1 (monotonic ns).
        A sleep, not a spin: a slow device's wait leaves the shared cores to the other stages."""
        if self.factor == 1.0:
            return t1, 0
        target = t1 + round((t1 - t0) * (self.factor - 1))
        now = time.monotonic_ns()
        while now < target:
            time.sleep((target - now) / 1e9)
            now = time.monotonic_ns()
        return now, now - t1
