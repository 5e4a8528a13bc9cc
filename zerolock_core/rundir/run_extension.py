"""A run trained on past the steps it was started with: `zerolock train --resume DIR --steps N`.

A reference run's step depends on its seed and its index, never on how many steps the run has (the batches
are drawn by seed and step, the learning rate is constant), so a run extended from its newest checkpoint
equals one trained that long from the start, bit for bit (tests/test_run_extension.py). Two things do
depend on the length: an α ramp spans the run's steps, and the pipeline runtime's stages are not built to
go on past their last step; both are refused in one line.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.field_words import FieldError
from ..config.run_config import RunConfig


def extends(saved: dict[str, Any], given: dict[str, Any]) -> bool:
    """`given` (a run config's dict, `out` left out) is `saved` with more steps and nothing else changed."""
    more = given["train"]["steps"] > saved["train"]["steps"]
    return more and {**given, "train": {**given["train"], "steps": saved["train"]["steps"]}} == saved


def fewer_steps(saved: dict[str, Any], given: dict[str, Any]) -> bool:
    """`given` is `saved` with fewer steps and nothing else changed: a run is extended, never cut."""
    return extends(given, saved)


def check_extendable(path: Path, *, saved_steps: int, cfg: RunConfig) -> None:
    """Refuses, naming `--steps`, an extension of the run in `path` (trained for `saved_steps`) to `cfg`'s
    steps that would not equal a run trained that long from the start."""
    steps = cfg.train.steps
    if cfg.train.runtime != "reference":
        raise FieldError("steps", lambda w: f"{w.resume(path)} {w.value('steps', steps)}: only a reference run "
                                            f"(--runtime reference) can be trained past its {saved_steps} steps; "
                                            f"this one ran in the {cfg.train.runtime} runtime")
    if cfg.objective.alpha_ramp:
        raise FieldError("steps", lambda w: f"{w.resume(path)} {w.value('steps', steps)}: the run's α ramp "
                                            f"({w.value('alpha_ramp', cfg.objective.alpha_ramp)}) spans its "
                                            f"{saved_steps} steps; more steps would change every α it used")
    if cfg.train.ckpt_every <= 0:  # (one whose checkpoints are gone trains again from step 0: still equal)
        raise FieldError("steps", lambda w: f"{w.resume(path)} {w.value('steps', steps)}: the run kept no "
                                            f"checkpoint to go on from (it ran with "
                                            f"{w.value('ckpt_every', cfg.train.ckpt_every)}); train it again "
                                            f"with {w.suggest('steps', steps)}")
