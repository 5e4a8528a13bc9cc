"""The Run form's values -> one validated RunConfig per chosen method (ConfigError otherwise)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zerolock_core.config import (CONSISTENCY_DIRECTIONS, LINK_PROFILE_NAMES, ConfigError, DataConfig, LinkConfig,
                                  ModelConfig, ObjectiveConfig, RunConfig, TrainConfig)

# (label shown, method); "bp" is the single-process backprop reference trainer
METHOD_CHOICES: tuple[tuple[str, str], ...] = (
    ("ZeroLock", "zerolock"), ("GPipe", "gpipe"), ("1F1B", "1f1b"), ("PipeDream", "pipedream"),
    ("BP reference (1 process)", "bp"))
PIPELINE_METHODS = ("zerolock", "gpipe", "1f1b", "pipedream")
REFERENCE_METHODS = ("bp",)


@dataclass(kw_only=True, frozen=True)
class RunForm:
    """What the user picked; the defaults are the tiny run the dashboard opens with."""
    methods: tuple[str, ...] = ("zerolock",)
    stages: int = 2
    batch: int = 8
    microbatches: int = 4
    alpha: str = "0.5"
    consistency: str = "reverse"
    steps: int = 30
    seed: int = 0
    link: str = "none"
    seq_len: int = 64
    eval_size: int = 64
    lr: float = 2e-3
    model: str = "tiny"
    dataset: str = "topics"


def _int(name: str, value: Any) -> int:
    if value is None or value == "":
        raise ConfigError(f"{name} is empty")
    if float(value) != int(float(value)):
        raise ConfigError(f"{name} must be a whole number (got {value})")
    return int(float(value))


def parse_alpha(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in str(text).replace(" ", "").split(",") if x)
    except ValueError:
        raise ConfigError(f"α: expected a number or comma-separated numbers (one per stage), got {text!r}") from None
    if not values:
        raise ConfigError("α is empty: give one value in (0, 1], or one per stage")
    return values


def form_from_values(*, methods: Any, stages: Any, batch: Any, microbatches: Any, alpha: Any, consistency: Any,
                     steps: Any, seed: Any, link: Any, seq_len: Any, eval_size: Any, lr: Any) -> RunForm:
    """Gradio widget values (numbers may arrive as floats or None) -> RunForm, or ConfigError."""
    chosen = tuple(methods or ())
    if not chosen:
        raise ConfigError("choose at least one method")
    unknown = [m for m in chosen if m not in PIPELINE_METHODS + REFERENCE_METHODS]
    if unknown:
        raise ConfigError(f"unknown method(s) {', '.join(unknown)}; choose from "
                          f"{', '.join(PIPELINE_METHODS + REFERENCE_METHODS)}")
    if consistency not in CONSISTENCY_DIRECTIONS:
        raise ConfigError(f"consistency {consistency!r} is not one of {', '.join(CONSISTENCY_DIRECTIONS)}")
    if link not in LINK_PROFILE_NAMES or link == "custom":
        raise ConfigError(f"link profile {link!r} is not one of none, local, wifi, mobile, constrained")
    if lr is None or lr == "":
        raise ConfigError("learning rate is empty")
    return RunForm(methods=chosen, stages=_int("stages K", stages), batch=_int("batch b", batch),
                   microbatches=_int("micro-batches m", microbatches), alpha=str(alpha),
                   consistency=consistency, steps=_int("steps", steps), seed=_int("seed", seed), link=link,
                   seq_len=_int("sequence length", seq_len), eval_size=_int("eval examples", eval_size),
                   lr=float(lr))


def config_for(form: RunForm, method: str, *, out: str) -> RunConfig:
    """The engine's own validation does the checking; its one-line message is what the UI shows.
    The BP reference runs in one process: link emulation does not apply to it."""
    reference = method in REFERENCE_METHODS
    return RunConfig(
        model=ModelConfig(model=form.model),
        data=DataConfig(dataset=form.dataset, seq_len=form.seq_len, eval_size=form.eval_size),
        objective=ObjectiveConfig(alpha=parse_alpha(form.alpha), consistency=form.consistency),
        train=TrainConfig(runtime="reference" if reference else "pipeline", method=method, stages=form.stages,
                          batch=form.batch, microbatches=form.microbatches, steps=form.steps, lr=form.lr,
                          seed=form.seed,
                          # checkpoints make the Watch tab's "Inject failure" recoverable (not PipeDream:
                          # its unflushed pipeline has no consistent checkpoint)
                          ckpt_every=0 if reference or method == "pipedream" else 2),
        link=LinkConfig(profile="none" if reference else form.link),
        out=out)


def configs_for(form: RunForm, *, out_for: Any) -> list[RunConfig]:
    """One config per chosen method, all validated before anything starts; `out_for(method)` names
    each run's directory. Raises ConfigError naming the method when more than one was chosen."""
    configs = []
    for method in form.methods:
        try:
            configs.append(config_for(form, method, out=out_for(method)))
        except ConfigError as err:
            raise ConfigError(f"{method}: {err}" if len(form.methods) > 1 else str(err)) from None
    return configs
