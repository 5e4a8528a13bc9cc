"""Uneven hardware on one machine: a stage computes as if on a slower device.

`--stage-speed 1,0.4,1` gives each stage a speed in (0, 1]; a straggler (`--fail 1@20:slow=3`) makes a
stage's compute `factor` times slower from a step on. Both stretch every compute action the same way
(`Executor.run` calls `stretch` once per action, on the compute kinds of vocabulary.py): after the real
compute of d ns the stage waits d·(1/speed · straggle − 1) more, measured from the action's own duration,
inside the action — so its event's bar is longer, busy time grows by the factor, and nothing the action
computed changes (the weights stay bitwise those of an even run).

On the CPU, d is the action's CPU time in this process where that is less than its wall time: with more
stage processes than cores, an action also waits for a core, and a wait is not compute — stretched too,
it would make the slow stage pay for the machine's contention 1/speed times over (`zerolock bench hetero`
measured its slow stage 25–30 % busier than the costs predict, before). With several torch threads the
process's CPU time runs ahead of the wall time and the wall time is taken, as on a GPU, where the CPU
time of an action says nothing of its kernels.
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
    cpu_time: bool = True  # compute is CPU time where less than wall time (a CPU stage); False: wall time (GPU)

    def at_step(self, steps_done: int) -> None:
        if self.straggler is not None:
            self.straggle = self.straggler(steps_done)

    def __post_init__(self) -> None:
        assert 0 < self.speed <= 1, self.speed  # the config refuses anything else

    @property
    def factor(self) -> float:
        """How many times longer a compute action takes than it really did."""
        return self.straggle / self.speed

    def computed_ns(self, t0: int, t1: int, cpu_ns: int) -> int:
        """What of an action that ran from t0 to t1 (monotonic ns), taking `cpu_ns` of this process's CPU time,
        was its compute."""
        return min(t1 - t0, cpu_ns) if self.cpu_time else t1 - t0

    def stretch(self, t0: int, t1: int, cpu_ns: int) -> tuple[int, int]:
        """(the action's new end, the ns waited) for an action that really ran from t0 to t1 (monotonic ns),
        taking `cpu_ns` of CPU time. A sleep, not a spin: a slow device's wait leaves the shared cores to the
        other stages."""
        if self.factor == 1.0:
            return t1, 0
        target = t1 + round(self.computed_ns(t0, t1, cpu_ns) * (self.factor - 1))
        now = time.monotonic_ns()
        while now < target:
            time.sleep((target - now) / 1e9)
            now = time.monotonic_ns()
        return now, now - t1
