"""Run configuration: the sections of run_fields.py put together into one validated `RunConfig`,
checked before any work starts.

Every user mistake is a `ConfigError` (a `ValueError`) whose message names the flag, the value
and what is allowed, so the CLI can print one clear line instead of a traceback. A refusal about one
field is a `field_words.FieldError`, which the dashboard renders with its form's labels and a config
file's reader with its keys.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from .alpha_ramp import AlphaRamp
from .field_words import (ConfigError, FieldError, check_field, microbatches_below_stages, not_divisible,
                          raise_all, require as rule)
from .readout_spec import ReadoutSpec
from ..method.balance import AUTO
from ..vocabulary import STRAGGLER, STRAGGLER_FACTOR
from ..methods import FROZEN_PREFIX_METHODS, every_chunk_trains, refusal
from .run_fields import (CONSISTENCY_DIRECTIONS, LINK_PROFILE_NAMES, MAX_STRAGGLER_FACTOR, METHODS_BY_RUNTIME,
                         RUN_FIELDS, SECTIONS, WARM_STANDBY, DataConfig, LinkConfig, ModelConfig, ObjectiveConfig,
                         TrainConfig)

__all__ = ["CONSISTENCY_DIRECTIONS", "FAILURE_MODES", "HEARTBEAT_INTERVAL_S", "LINK_PROFILE_NAMES",
           "METHODS_BY_RUNTIME", "MIN_HEARTBEAT_TIMEOUT_S", "STRAGGLER", "STRAGGLER_FACTOR",
           "WARM_STANDBY",
           "DataConfig", "FailureSpec", "LinkConfig", "ModelConfig", "ObjectiveConfig", "RunConfig",
           "TrainConfig", "replace", "upgrade_sections", "validate"]

FAILURE_MODES = ("kill", "stop", "post-step", "mid-ckpt", STRAGGLER)
HEARTBEAT_INTERVAL_S = 0.2  # how often a stage beats (runtime/heartbeat.py uses this)
MIN_HEARTBEAT_TIMEOUT_S = 1.0  # five missed beats


@dataclass(kw_only=True, frozen=True)
class FailureSpec:
    stage: int
    step: int  # injected once the stage has completed this many optimizer steps
    mode: str = "kill"
    factor: float = 1.0  # a straggler's: its compute takes this many times longer from `step` on

    @staticmethod
    def parse(text: str) -> "FailureSpec":
        head, _, mode_text = text.partition(":")
        stage, at, step = head.partition("@")
        mode, eq, factor = (mode_text or "kill").partition("=")
        try:
            spec = FailureSpec(stage=int(stage), step=int(step), mode=mode,
                               factor=float(factor) if eq else STRAGGLER_FACTOR if mode == STRAGGLER else 1.0)
        except ValueError:
            raise FieldError("failures", lambda w: f"{w.value('failures', repr(text))} is not STAGE@STEP[:MODE] "
                                                   f"(e.g. 1@3:kill, 1@3:slow=3)") from None
        if not at or spec.mode not in FAILURE_MODES or (eq and mode != STRAGGLER):
            raise FieldError("failures", lambda w: f"{w.value('failures', repr(text))}: mode must be one of "
                                                   f"{', '.join(FAILURE_MODES)} (only slow takes =X)")
        if mode == STRAGGLER and not 1 < spec.factor <= MAX_STRAGGLER_FACTOR:  # the pacing sleeps for it
            raise FieldError("failures", lambda w: f"{w.value('failures', repr(text))}: a straggler's factor must "
                                                   f"be a finite number > 1 and at most {MAX_STRAGGLER_FACTOR:g} "
                                                   f"(e.g. slow=3: three times slower)")
        return spec

    @property
    def recovers(self) -> bool:
        """Whether the stage fails and is replaced (every mode but the straggler's)."""
        return self.mode != STRAGGLER

    @property
    def label(self) -> str:
        """The canonical text of the spec ("1@3:kill", "1@3:slow=3"): its name in the store and in metrics.json."""
        return f"{self.stage}@{self.step}:{self.mode}" + (f"={self.factor:g}" if self.mode == STRAGGLER else "")


@dataclass(kw_only=True, frozen=True)
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    link: LinkConfig = field(default_factory=LinkConfig)
    out: str | None = None

    def __post_init__(self) -> None:
        validate(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "RunConfig":
        def tuples(cls: type, values: dict[str, Any]) -> Any:
            names = {f.name for f in dataclasses.fields(cls)}
            unknown = set(values) - names
            if unknown:
                raise ConfigError(f"unknown {cls.__name__} field(s): {', '.join(sorted(unknown))}")
            return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

        sections = upgrade_sections({name: dict(d.get(name, {})) for name in SECTIONS})
        return RunConfig(**{name: tuples(SECTIONS[name], values) for name, values in sections.items()},
                         out=d.get("out"))


def upgrade_sections(sections: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The sections of a config written before a field was renamed or changed its kind (a run directory's
    config.json, a config.toml), in today's names; changed in place and returned."""
    model, objective = sections.setdefault("model", {}), sections.setdefault("objective", {})
    if "readout_adapter" in model:  # --readout-adapter none | mlp | affine (once a bool) became --readout
        adapter = model.pop("readout_adapter")
        adapter = ("mlp" if adapter else "none") if isinstance(adapter, bool) else adapter
        model.setdefault("readout", "head" if adapter == "none" else adapter)
    if "alpha_schedule" in objective:  # the α ramp's old name
        objective.setdefault("alpha_ramp", objective.pop("alpha_schedule"))
    return sections


def validate(cfg: RunConfig) -> None:
    """Checks everything that can be checked without loading the model (preflight.py adds what needs
    a look at the model's config and the dataset's files): every field's own bounds and choices
    (run_fields.py), then the rules between fields. A rule about a field raises a FieldError: its
    message is given the words of whoever asked. Every refusal is raised at once (ConfigErrors when
    there are several): each field's own, else the first of each group of rules."""
    raise_all([err for key, f in RUN_FIELDS.items()
               if (err := _refusal(check_field, key, getattr(getattr(cfg, f.section), key)))])
    # the rules assume every field is right by itself; the groups are independent of each other
    raise_all([err for check in (_check_train, _check_speed, _check_failures, _check_link, _check_objective,
                                 _check_model,
                                 _check_data) if (err := _refusal(check, cfg))])


def _refusal(check: Callable[..., None], *args: Any) -> ConfigError | None:
    try:
        check(*args)
    except ConfigError as err:
        return err
    return None


def _check_train(cfg: RunConfig) -> None:
    from ..schedule import schedulable  # the schedule builders, only when a config is checked

    t = cfg.train
    allowed = METHODS_BY_RUNTIME[t.runtime]
    rule(t.method in allowed, "method", lambda w: f"{w.value('method', repr(t.method))} is not available with "
                                                  f"{w.value('runtime', t.runtime)} (choose {', '.join(allowed)})")
    rule(t.batch % t.microbatches == 0, "microbatches",
         lambda w: not_divisible(w, batch=t.batch, microbatches=t.microbatches))
    rule(t.device == "cpu" or t.device.startswith("cuda"), "device",
         lambda w: f"{w.value('device', repr(t.device))} is not 'cpu' or 'cuda[:N]'")
    rule(schedulable(t.method, stages=t.stages, microbatches=t.microbatches), "microbatches",
         lambda w: microbatches_below_stages(w, method=t.method, batch=t.batch, microbatches=t.microbatches, stages=t.stages))
    if t.frozen_stages:
        rule(t.frozen_stages < t.stages, "frozen_stages",
             lambda w: f"{w.value('frozen_stages', t.frozen_stages)} leaves no stage to train: it must be below "
                       f"{w.value('stages', t.stages)}")
        rule(t.method in FROZEN_PREFIX_METHODS, "frozen_stages",
             lambda w: f"{w.name('frozen_stages')} cuts an exact-gradient backward short: it belongs to "
                       f"{', '.join(FROZEN_PREFIX_METHODS)}, not {w.value('method', t.method)}"
                       + (" (which already trains its last chunk alone)" if t.method == "terminal" else ""))
    rule(t.heartbeat_timeout_s >= MIN_HEARTBEAT_TIMEOUT_S, "heartbeat_timeout_s",
         lambda w: f"{w.name('heartbeat_timeout_s')} must be at least {MIN_HEARTBEAT_TIMEOUT_S:g} s "
                   f"(got {t.heartbeat_timeout_s:g}): stages beat every {HEARTBEAT_INTERVAL_S:g} s, and a shorter "
                   f"timeout declares healthy stages dead")
    rule(t.stall_timeout_s == 0 or t.stall_timeout_s >= 5, "stall_timeout_s",
         lambda w: f"{w.name('stall_timeout_s')} must be 0 (auto) or at least 5 s (got {t.stall_timeout_s:g})")


def _check_speed(cfg: RunConfig) -> None:
    t = cfg.train
    n = len(t.stage_speed)
    rule(n in (0, 1, t.stages), "stage_speed",
         lambda w: f"{w.name('stage_speed')} has {n} values; give one, or one per stage ({t.stages})")
    rule(n == 0 or t.runtime == "pipeline", "stage_speed",
         lambda w: f"{w.name('stage_speed')} slows the stages of {w.value('runtime', 'pipeline')}; "
                   f"{w.value('runtime', t.runtime)} has none")


def _check_link(cfg: RunConfig) -> None:
    t, lk = cfg.train, cfg.link
    rule(lk.profile != "custom" or (lk.bandwidth_mbps is not None and lk.latency_ms is not None), "profile",
         lambda w: f"{w.value('profile', 'custom')} needs {w.name('bandwidth_mbps')} and {w.name('latency_ms')}")
    rule(lk.profile == "none" or t.runtime == "pipeline", "profile",
         lambda w: f"{w.name('profile')} emulation needs {w.value('runtime', 'pipeline')}")


def _check_objective(cfg: RunConfig) -> None:
    t, o = cfg.train, cfg.objective
    rule(len(o.alpha) >= 1, "alpha", lambda w: f"{w.name('alpha')} needs at least one value")
    rule(len(o.alpha) in (1, t.stages), "alpha",
         lambda w: f"{w.name('alpha')} has {len(o.alpha)} values; give one, or one per stage ({t.stages})")
    if o.alpha_ramp:
        AlphaRamp.parse(o.alpha_ramp)  # raises ConfigError with the reason
        rule(len(o.alpha) == 1, "alpha_ramp",
             lambda w: f"{w.name('alpha_ramp')} sets α for every chunk: give no per-stage {w.name('alpha')} with it")
        rule(every_chunk_trains(t.method), "alpha_ramp", lambda w: f"{w.name('alpha_ramp')} belongs to ZeroLock's local "
                                                             f"objective; {w.value('method', t.method)} has no α")


def _check_model(cfg: RunConfig) -> None:
    t, m = cfg.train, cfg.model
    rule(len(m.lora_targets) >= 1, "lora_targets", lambda w: f"{w.name('lora_targets')} needs at least one module name")
    _check_readout(m.readout, t.method)
    if m.boundaries is not None:
        b = m.boundaries
        rule(len(b) == t.stages - 1 or b == AUTO, "boundaries",
             lambda w: f"{w.name('boundaries')} has {len(b)} values; "
                       f"{w.value('stages', t.stages)} needs {t.stages - 1}")
        rule(all(x > 0 for x in b) and list(b) == sorted(set(b)), "boundaries",
             lambda w: f"{w.value('boundaries', list(b))} must be strictly increasing layer indices > 0")
    r = m.recompute
    rule(len(r) in (0, 1, t.stages), "recompute",
         lambda w: f"{w.name('recompute')} has {len(r)} values; give one, or one per stage ({t.stages})")
    # one value stands for every stage: stage 0 decides (never a K-long tuple: K is not bounded yet here)
    frozen_recomputed = [s for s, n in enumerate(r) if n and s < t.frozen_stages]
    rule(not frozen_recomputed, "recompute",
         lambda w: f"{w.name('recompute')} recomputes layers of stage {frozen_recomputed[0]}, which "
                   f"{w.value('frozen_stages', t.frozen_stages)} freezes: a frozen stage keeps nothing for a "
                   "backward; give it 0")


# the fields that name a user file's fields (run_fields.YOUR_DATA), by the kind of task they describe
CLASSIFICATION_FIELDS = ("text_fields", "label_field", "label_words")
RESPONSE_FIELDS = ("prompt_field", "response_field")


def _check_data(cfg: RunConfig) -> None:
    d = cfg.data
    named = [key for key in (*CLASSIFICATION_FIELDS, *RESPONSE_FIELDS, "eval_dataset") if getattr(d, key)]
    built_in = ":" not in d.dataset
    rule(not (built_in and named), named[0] if named else "dataset",
         lambda w: f"{w.name(named[0])} names a field of your own file; {w.value('dataset', d.dataset)} is built in "
                   f"(give a file: csv:PATH, jsonl:PATH, parquet:PATH or disk:PATH)")
    rule(bool(d.prompt_field) == bool(d.response_field), "prompt_field" if not d.prompt_field else "response_field",
         lambda w: f"a prompt -> response task needs both {w.name('prompt_field')} and {w.name('response_field')}")
    empty = [i for i, word in enumerate(d.label_words, 1) if not word.strip()]
    rule(not empty, "label_words",
         lambda w: f"{w.name('label_words')}: word {empty[0]} of {len(d.label_words)} is empty; the words name the "
                   f"classes in order, so none may be left out")
    mixed = [key for key in CLASSIFICATION_FIELDS if getattr(d, key)]
    rule(not (d.prompt_field and mixed), mixed[0] if mixed else "prompt_field",
         lambda w: f"{w.name(mixed[0])} belongs to a classification; {w.name('prompt_field')} makes a prompt -> "
                   f"response task: give one kind")


def _check_readout(text: str, method: str) -> None:
    """--readout: a known readout, and one the method reads through. BP and terminal train the last chunk
    only, which reads a top readout through the head alone: there a top readout would change nothing."""
    try:
        spec = ReadoutSpec.parse(text)
    except ValueError as err:
        raise FieldError("readout", lambda w: f"{w.name('readout')}: {err}") from None
    rule(every_chunk_trains(method) or not spec.reads_layers, "readout",
         lambda w: f"{w.value('readout', text)} is a readout of ZeroLock's chunks before the last; "
                   f"{w.value('method', method)} trains only the last chunk, which reads through the head "
                   f"(choose head, affine or mlp)")


def _check_failures(cfg: RunConfig) -> None:
    """--fail: each spec well-formed, inside the run, recoverable; no stage failing more often than it may restart."""
    t = cfg.train
    specs = [(text, FailureSpec.parse(text)) for text in t.failures]
    for text, f in specs:
        rule(t.runtime == "pipeline", "failures",
             lambda w: f"{w.name('failures')} needs {w.value('runtime', 'pipeline')}")
        rule(0 <= f.stage < t.stages, "fail_stage", lambda w, f=f, text=text:
             f"{w.failure_part(text, 'fail_stage', f.stage)} is not in 0..{t.stages - 1}")
        rule(1 <= f.step < t.steps, "fail_step", lambda w, f=f, text=text:
             f"{w.failure_part(text, 'fail_step', f.step)} must be in 1..{t.steps - 1}")
        if not f.recovers:
            continue  # a straggler needs no checkpoint and no replacement
        _require(not refusal(t.method), refusal(t.method))  # before --ckpt-every: no checkpoint helps it
        rule(t.ckpt_every > 0, "ckpt_every", lambda w, text=text:
             f"{w.failure(text)} needs checkpoints to recover from: set {w.name('ckpt_every')}")
        if f.mode == "mid-ckpt":
            first_ckpt = -(-f.step // t.ckpt_every) * t.ckpt_every
            rule(first_ckpt <= t.steps, "failures", lambda w, f=f, text=text:
                 f"{w.failure(text)}: no checkpoint is written at or after step {f.step} "
                 f"({w.value('ckpt_every', t.ckpt_every)}, {w.value('steps', t.steps)}), so it could never fire")
    per_stage: dict[int, int] = {}
    for _, f in specs:
        if not f.recovers:
            continue
        per_stage[f.stage] = per_stage.get(f.stage, 0) + 1
    for stage, n in sorted(per_stage.items()):
        rule(n <= t.max_restarts, "max_restarts",
             lambda w, n=n, stage=stage: f"{w.name('failures')} injects {n} failures into stage {stage} but "
                                         f"{w.name('max_restarts')} is {t.max_restarts}: the run would end failed; "
                                         f"raise {w.name('max_restarts')}")
    labels = [f.label for _, f in specs]
    rule(len(set(labels)) == len(labels), "failures",
         lambda w: f"{w.name('failures')}: the same failure is given twice")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def replace(cfg: RunConfig, **sections: dict[str, Any]) -> RunConfig:
    """`replace(cfg, train={"steps": 3})`: a validated copy with some fields changed."""
    parts = {name: dataclasses.replace(getattr(cfg, name), **changes)
             for name, changes in sections.items() if name != "out"}
    if "out" in sections:
        parts["out"] = sections["out"]
    return dataclasses.replace(cfg, **parts)
