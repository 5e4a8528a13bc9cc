"""An α ramp: the weight of the task term moving over training, the same for every chunk (`--alpha-ramp`).

`linear:0.5->1` goes from α = 0.5 at the first step to α = 1 at the last (consistency first,
then the task alone); `cosine:A->B` follows half a cosine between the same ends. The value at a
step depends only on the step (and the run's length), so a pipeline stage and the reference, or a
stage restored from a checkpoint, use the same α for the same step. ("Schedule" in this project is
the pipeline's order of actions, schedule/.)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .field_words import FieldError

if TYPE_CHECKING:
    from .run_config import RunConfig

SHAPES = ("linear", "cosine")
_PATTERN = re.compile(r"^(?P<shape>[a-z]+):(?P<start>[0-9.eE+-]+)->(?P<end>[0-9.eE+-]+)$")


@dataclass(kw_only=True, frozen=True)
class AlphaRamp:
    shape: str
    start: float
    end: float

    @staticmethod
    def parse(text: str) -> "AlphaRamp":
        m = _PATTERN.match(text.strip().replace(" ", ""))
        if m is None or m["shape"] not in SHAPES:
            raise FieldError("alpha_ramp", lambda w: f"{w.value('alpha_ramp', repr(text))} is not SHAPE:START->END "
                                                     f"with SHAPE one of {', '.join(SHAPES)} (e.g. linear:0.5->1)")
        try:
            start, end = float(m["start"]), float(m["end"])
        except ValueError:
            raise FieldError("alpha_ramp", lambda w: f"{w.value('alpha_ramp', repr(text))}: START and END must be "
                                                     f"numbers") from None
        for value in (start, end):
            if not 0.0 < value <= 1.0:
                raise FieldError("alpha_ramp", lambda w, value=value: f"{w.value('alpha_ramp', repr(text))}: "
                                                                      f"α {value:g} is outside (0, 1]")
        return AlphaRamp(shape=m["shape"], start=start, end=end)

    def at(self, step: int, steps: int) -> float:
        """α for the 0-based optimizer step `step` of a run of `steps` steps."""
        assert 0 <= step < max(1, steps), (step, steps)
        fraction = step / (steps - 1) if steps > 1 else 1.0
        if self.shape == "cosine":
            fraction = (1.0 - math.cos(math.pi * fraction)) / 2.0
        return self.start + (self.end - self.start) * fraction


def alpha_by_step(cfg: RunConfig, chunk: int) -> Callable[[int], float] | None:
    """`chunk`'s α as a function of the 0-based optimizer step, for a StageWorker (None: the constant
    α of ObjectiveConfig.alpha_for). A ramp sets the same α for every chunk."""
    if not cfg.objective.alpha_ramp:
        return None
    ramp, steps = AlphaRamp.parse(cfg.objective.alpha_ramp), cfg.train.steps
    return lambda step: ramp.at(step, steps)
