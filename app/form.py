"""The Run form's values -> one validated, preflighted RunConfig per chosen method (ConfigError
otherwise, rendered in the form's words with `field_words.render(err, field_words.FORM)`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from zerolock_core.config.run_config import (CONSISTENCY_DIRECTIONS, FAILURE_MODES, LINK_PROFILE_NAMES, DataConfig,
                                  LinkConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig, replace)
from zerolock_core.config.field_words import ConfigError, FieldError, check_field, number, qualified, raise_all, whole
from zerolock_core.train.preflight import preflight
from zerolock_core.analysis.recommended import RECOMMENDED_AT_DEPTH, RECOMMENDED_MARK
from zerolock_core.config.readout_spec import ReadoutSpec
from zerolock_core.config.setting import value_text
from zerolock_core.method.recompute_layout import MEMORY_HALVING
from zerolock_core.train.model_recompute import memory_halving_recompute_for
from zerolock_core.methods import PIPELINE, REFERENCE, every_chunk_trains, label, names, refusal

from .data_preview import DATA_KINDS, DataFields

# the methods the form offers (methods.py, controls aside): those the pipeline runs, then those only the
# single-process reference trainer runs ("bp", the backprop reference)
PIPELINE_METHODS = names(where=lambda m: PIPELINE in m.runtimes and not m.control)
REFERENCE_METHODS = names(where=lambda m: m.runtimes == (REFERENCE,) and not m.control)
# (label shown, method): the one recommended for K >= 3 marked (analysis/recommended.py), its measured price
# under the field (frontier_summary.py)
METHOD_CHOICES: tuple[tuple[str, str], ...] = tuple(
    (label(m) + (f" {RECOMMENDED_MARK}" if m == RECOMMENDED_AT_DEPTH.method else ""), m)
    for m in PIPELINE_METHODS + REFERENCE_METHODS)
# (label shown, --readout): short enough to read once picked in a third of the form's width
READOUT_CHOICES: tuple[tuple[str, str], ...] = tuple(
    (f"{value} — {words}", value)
    for value, words in (
        ("head", "the paper's frozen norm + LM head"),
        ("top-lora:last", "last chunk's layers, own LoRA"),
        ("top:last", "last chunk's layers, frozen"),
        ("track:2", "last chunk's layers and LoRA"),
        ("sample-lora:2", "2 later layers, own LoRA"),
        ("affine", "a trained translator (tuned lens)"),
        ("mlp", "a trained residual MLP"),
    ))
NO_FAILURE = "none"  # the failure mode of "no scheduled failure"
NO_RECOMPUTE = "none"  # every layer keeps its activations for the backward
# (label shown, the form's recompute): MEMORY_HALVING is resolved per method's split in config_for
RECOMPUTE_CHOICES: tuple[tuple[str, str], ...] = (
    ("none — keep every activation", NO_RECOMPUTE),
    (f"{MEMORY_HALVING}{f' {RECOMMENDED_MARK}' if RECOMMENDED_AT_DEPTH.recompute == MEMORY_HALVING else ''} — "
     "recompute layers: under ½ of 1F1B's peak", MEMORY_HALVING))


@dataclass(kw_only=True, frozen=True)
class RunForm:
    """What the user picked. The fields that are config fields start at the config's defaults
    (run_fields.py): the dashboard opens on the run plain `zerolock train` makes, about half
    a minute on 2 cores (K = 2: a core a stage), long enough to inject a failure into by hand. The
    form's own fields: the methods to run one after another and a scheduled failure."""
    methods: tuple[str, ...] = ("zerolock",)
    stages: int = TrainConfig.stages
    batch: int = TrainConfig.batch
    microbatches: int = TrainConfig.microbatches
    alpha: str = value_text(ObjectiveConfig.alpha)  # as the user types it: "0.5", "1,0.5"
    consistency: str = ObjectiveConfig.consistency
    steps: int = TrainConfig.steps
    seed: int = TrainConfig.seed
    link: str = LinkConfig.profile
    seq_len: int = DataConfig.seq_len
    eval_size: int = DataConfig.eval_size
    lr: float = TrainConfig.lr
    model: str = ModelConfig.model
    # a built-in dataset's name or, once the form is read (tab_run.start_runs), an uploaded file as KIND:PATH
    dataset: str = DataConfig.dataset
    data: DataFields = DataFields()  # an uploaded file's fields
    readout: str = ModelConfig.readout
    # NO_RECOMPUTE, or MEMORY_HALVING: each stage recomputes in its backward the fewest of its first layers
    # that keep a 1F1B / PipeDream stage under half of 1F1B's peak (--recompute; the gradients do not change)
    recompute: str = NO_RECOMPUTE
    # a failure scheduled from the form (pipeline methods): stage fail_stage fails once it has done
    # fail_step optimizer steps, in fail_mode (one of FAILURE_MODES, or NO_FAILURE)
    fail_stage: int = 1
    fail_step: int = 21  # mid-window (checkpoints every 2 steps): the replacement has micro-batches to replay
    fail_mode: str = NO_FAILURE
    tensorboard: bool = TrainConfig.tensorboard  # also write TensorBoard event files (RUN/tensorboard/)

    @property
    def failures(self) -> tuple[str, ...]:
        """As TrainConfig.failures takes them ("1@20:kill")."""
        if self.fail_mode == NO_FAILURE:
            return ()
        return (f"{self.fail_stage}@{self.fail_step}:{self.fail_mode}",)


def parse_alpha(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in str(text).replace(" ", "").split(",") if x)
    except ValueError:
        raise FieldError("alpha", lambda w: f"{w.name('alpha')}: expected a number or comma-separated numbers "
                                            f"(one per stage), got {text!r}") from None
    if not values:
        raise FieldError("alpha", lambda w: f"{w.name('alpha')} is empty: give one value in (0, 1], or one per stage")
    return values


class _Reader:
    """Reads the form's widgets and keeps every refusal, so that the form lists all its mistakes at once."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def take(self, key: str, parse: Callable[[str, Any], Any], value: Any) -> Any:
        """The field's value, parsed and within its own bounds; None (and its refusal kept) otherwise."""
        try:
            parsed = parse(key, value)
            check_field(key, parsed)
            return parsed
        except ConfigError as err:
            self.errors.append(err)
            return None

    def require(self, ok: bool, message: str) -> None:
        if not ok:
            self.errors.append(ConfigError(message))


def form_from_values(*, methods: Any, stages: Any, batch: Any, microbatches: Any, alpha: Any, consistency: Any,
                     steps: Any, seed: Any, link: Any, seq_len: Any, eval_size: Any, lr: Any,
                     fail_stage: Any = RunForm.fail_stage, fail_step: Any = RunForm.fail_step,
                     fail_mode: Any = RunForm.fail_mode, readout: Any = RunForm.readout,
                     dataset: Any = RunForm.dataset, data_kind: Any = DataFields.kind, text_fields: Any = "",
                     label_field: Any = "", label_words: Any = "", prompt_field: Any = "",
                     response_field: Any = "", tensorboard: Any = RunForm.tensorboard,
                     recompute: Any = RunForm.recompute) -> RunForm:
    """Gradio widget values (numbers arrive as floats or None: 2.5 is refused, not rounded) -> RunForm,
    or a ConfigError naming every field that is wrong by itself (ConfigErrors when several are; the
    rules between fields are the config's, checked once each field is right: configs_for)."""
    r = _Reader()
    chosen = tuple(methods or ())
    r.require(bool(chosen), "choose at least one method")
    unknown = [m for m in chosen if m not in PIPELINE_METHODS + REFERENCE_METHODS]
    r.require(not unknown, f"unknown method(s) {', '.join(unknown)}; choose from "
                           f"{', '.join(PIPELINE_METHODS + REFERENCE_METHODS)}")
    ints = {key: r.take(key, whole, value) for key, value in (
        ("stages", stages), ("batch", batch), ("microbatches", microbatches), ("steps", steps))}
    r.take("alpha", lambda _, text: parse_alpha(text), alpha)
    r.require(consistency in CONSISTENCY_DIRECTIONS,
              f"consistency {consistency!r} is not one of {', '.join(CONSISTENCY_DIRECTIONS)}")
    r.require(readout in {value for _, value in READOUT_CHOICES},
              f"readout {readout!r} is not one of {', '.join(v for _, v in READOUT_CHOICES)}")
    r.require(recompute in {value for _, value in RECOMPUTE_CHOICES},
              f"recompute {recompute!r} is not one of {', '.join(v for _, v in RECOMPUTE_CHOICES)}")
    r.require(link in LINK_PROFILE_NAMES and link != "custom",
              f"link profile {link!r} is not one of none, local, wifi, mobile, constrained")
    ints["seed"] = r.take("seed", whole, seed)
    mode = fail_mode or NO_FAILURE
    r.require(mode in (NO_FAILURE, *FAILURE_MODES),
              f"failure mode {mode!r} is not one of {', '.join((NO_FAILURE, *FAILURE_MODES))}")
    # without a scheduled failure its stage and step are not read
    scheduled = mode != NO_FAILURE
    ints["fail_stage"] = r.take("fail_stage", whole, fail_stage) if scheduled else RunForm.fail_stage
    ints["fail_step"] = r.take("fail_step", whole, fail_step) if scheduled else RunForm.fail_step
    ints.update((key, r.take(key, whole, value)) for key, value in (("seq_len", seq_len), ("eval_size", eval_size)))
    rate = r.take("lr", number, lr)
    r.require(isinstance(dataset, str) and bool(dataset), "choose a dataset")
    r.require(data_kind in DATA_KINDS, f"the kind of task {data_kind!r} is not one of {', '.join(DATA_KINDS)}")
    texts = dict(text_fields=text_fields, label_field=label_field, label_words=label_words,
                 prompt_field=prompt_field, response_field=response_field)
    r.require(all(isinstance(v, str) for v in texts.values()), "the data fields are names (text)")
    r.require(isinstance(tensorboard, bool), f"TensorBoard logs is on or off, not {tensorboard!r}")
    raise_all(r.errors)
    return RunForm(methods=chosen, alpha=str(alpha), consistency=consistency, link=link, lr=rate, fail_mode=mode,
                   readout=readout, recompute=recompute, dataset=dataset, data=DataFields(kind=data_kind, **texts),
                   tensorboard=tensorboard, **ints)


def readout_of(form: RunForm, method: str) -> str:
    """A top readout is a readout of ZeroLock's chunks before the last: the other methods train the last
    chunk only, which reads through the head (the engine refuses the pair; the form runs them beside)."""
    return form.readout if every_chunk_trains(method) or not ReadoutSpec.parse(form.readout).reads_layers else "head"


def recompute_of(form: RunForm) -> tuple[int, ...]:
    """--recompute per stage for the form's choice (the form splits evenly: no --boundaries)."""
    if form.recompute == NO_RECOMPUTE:
        return ()
    return memory_halving_recompute_for(form.model, form.stages, None)


def config_for(form: RunForm, method: str, *, out: str) -> RunConfig:
    """The engine's own validation does the checking; its one-line message is what the UI shows. Without
    the form's recompute: its layout needs a split the model has, which preflight checks (configs_for).
    The BP reference runs in one process: link emulation and scheduled failures do not apply to it."""
    reference = method in REFERENCE_METHODS
    return RunConfig(
        model=ModelConfig(model=form.model, readout=readout_of(form, method)),
        data=form.data.data_config(form.dataset, seq_len=form.seq_len, eval_size=form.eval_size),
        objective=ObjectiveConfig(alpha=parse_alpha(form.alpha), consistency=form.consistency),
        train=TrainConfig(runtime=REFERENCE if reference else TrainConfig.runtime, method=method, stages=form.stages,
                          batch=form.batch, microbatches=form.microbatches, steps=form.steps, lr=form.lr,
                          seed=form.seed, tensorboard=form.tensorboard,
                          # checkpoints make the Watch tab's "Inject failure" recoverable (not a method that
                          # cannot be recovered, PipeDream: its unflushed pipeline has no consistent checkpoint)
                          ckpt_every=0 if reference or refusal(method) else 2,
                          failures=() if reference else form.failures),
        link=LinkConfig(profile="none" if reference else form.link),
        out=out)
    return cfg


def configs_for(form: RunForm, *, out_for: Any) -> list[RunConfig]:
    """One config per chosen method, all validated and preflighted (model, layers, dataset) before
    anything starts; `out_for(method)` names each run's directory (and creates nothing). Raises
    ConfigError naming the method when more than one was chosen."""
    configs = []
    for method in form.methods:
        try:
            cfg = config_for(form, method, out=out_for(method))
            preflight(cfg)
            if form.recompute != NO_RECOMPUTE:  # the split is the model's now; recompute changes no gradient
                cfg = replace(cfg, model={"recompute": recompute_of(form)})
        except ConfigError as err:
            raise (qualified(err, method) if len(form.methods) > 1 else err) from None
        configs.append(cfg)
    return configs
