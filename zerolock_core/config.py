"""Run configuration: keyword-only dataclasses, validated before any work starts.

Every user mistake is a `ConfigError` (a `ValueError`) whose message names the flag, the value
and what is allowed, so the CLI can print one clear line instead of a traceback. The rules a Run form
field can break raise `preflight.FieldError`, whose message the dashboard renders with its own labels.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from .threads import DEFAULT_THREADS

FAILURE_MODES = ("kill", "stop", "post-step", "mid-ckpt")

METHODS_BY_RUNTIME = {
    "reference": ("bp", "zerolock"),
    "pipeline": ("zerolock", "gpipe", "1f1b", "pipedream"),
}
CONSISTENCY_DIRECTIONS = ("reverse", "forward")
# none | mlp: the paper's option (b), a residual MLP before the frozen head | affine: a tuned-lens
# style translator h + A h + b (both the identity at initialisation)
READOUT_ADAPTERS = ("none", "mlp", "affine")


class ConfigError(ValueError):
    """A bad user-supplied value; the message is meant to be shown as is."""


WARM_STANDBY = ("auto", "on", "off")
HEARTBEAT_INTERVAL_S = 0.2  # how often a stage beats (runtime/heartbeat.py uses this)
MIN_HEARTBEAT_TIMEOUT_S = 1.0  # five missed beats
PIPEDREAM_REFUSAL = ("PipeDream cannot be recovered: its unflushed pipeline keeps several weight versions "
                     "in flight, so no step boundary is a consistent checkpoint of every stage (recovery "
                     "covers zerolock locally and gpipe / 1f1b by global rollback)")


@dataclass(kw_only=True, frozen=True)
class FailureSpec:
    stage: int
    step: int  # injected once the stage has completed this many optimizer steps
    mode: str = "kill"

    @staticmethod
    def parse(text: str) -> "FailureSpec":
        head, _, mode = text.partition(":")
        stage, at, step = head.partition("@")
        try:
            spec = FailureSpec(stage=int(stage), step=int(step), mode=mode or "kill")
        except ValueError:
            raise ConfigError(f"--fail {text!r} is not STAGE@STEP[:MODE] (e.g. 1@3:kill)") from None
        if not at or spec.mode not in FAILURE_MODES:
            raise ConfigError(f"--fail {text!r}: mode must be one of {', '.join(FAILURE_MODES)}")
        return spec

    @property
    def label(self) -> str:
        """The canonical text of the spec ("1@3:kill"): its name in the store and in metrics.json."""
        return f"{self.stage}@{self.step}:{self.mode}"


@dataclass(kw_only=True, frozen=True)
class ModelConfig:
    model: str = "tiny"  # "tiny" (embedded), a local directory, or a hub id
    lora_rank: int = 4
    lora_alpha: float = 16.0
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    readout_adapter: str = "none"  # one of READOUT_ADAPTERS
    readout_adapter_hidden: int = 64
    boundaries: tuple[int, ...] | None = None  # first layer of chunks 2..K; None = even split


@dataclass(kw_only=True, frozen=True)
class DataConfig:
    dataset: str = "topics"  # topics | needle | ag_news | csv:PATH
    seq_len: int = 128
    eval_size: int = 256  # eval examples scored (0 = the whole eval split)


@dataclass(kw_only=True, frozen=True)
class ObjectiveConfig:
    alpha: tuple[float, ...] = (0.5,)  # one value for every chunk, or one per chunk
    consistency: str = "reverse"  # reverse = KL(p_k || p_{k-1}) (paper Eq. 5); forward = KL(p_{k-1} || p_k)
    alpha_schedule: str = ""  # e.g. "linear:0.5->1" (alpha_schedule.py); "" = the constant alpha above

    def alpha_for(self, chunk: int) -> float:
        return self.alpha[0] if len(self.alpha) == 1 else self.alpha[chunk]

    def alpha_at(self, chunk: int, step: int, steps: int) -> float:
        """α of `chunk` at the 0-based optimizer step `step` of a `steps`-step run."""
        if not self.alpha_schedule:
            return self.alpha_for(chunk)
        from .alpha_schedule import AlphaSchedule

        return AlphaSchedule.parse(self.alpha_schedule).at(step, steps)


@dataclass(kw_only=True, frozen=True)
class TrainConfig:
    runtime: str = "reference"
    method: str = "zerolock"
    stages: int = 3
    batch: int = 8
    microbatches: int = 4
    steps: int = 200
    lr: float = 5e-3
    weight_decay: float = 0.0
    seed: int = 0
    eval_every: int = 0  # 0 = evaluate at the end only
    final_eval: bool = True  # pipeline: evaluate the final weights (off: metrics without eval, seconds sooner)
    threads: int = DEFAULT_THREADS  # torch threads per computing process; 0 = a fair share of the cores (threads.py)
    device: str = "cpu"
    inflight_depth: int = 2  # bounded inbound buffer: hidden states sent but not yet consumed
    memory_budget_bytes: int = 0  # > 0: a stage whose measured activations exceed it fails (OOM-like)
    ckpt_every: int = 0  # pipeline: each stage checkpoints every N update windows (0 = never)
    keep_checkpoints: int = 3
    failures: tuple[str, ...] = ()  # injected failures, "STAGE@STEP[:MODE]"
    heartbeat_timeout_s: float = 3.0  # a stage silent this long is declared failed
    replay_buffer: int = 0  # hidden states an upstream stage keeps for replay (0 = what ckpt_every needs)
    # with checkpoints, keep a spare process with its imports done for a replacement: "on", "off", or
    # "auto" = on when the machine has more cores than stages (the spare's imports then cost no stage)
    warm_standby: str = "auto"
    max_restarts: int = 3  # replacements per stage before the run ends failed (a crash loop)
    stall_timeout_s: float = 0.0  # no action anywhere for this long ends the run failed (0 = auto)


@dataclass(kw_only=True, frozen=True)
class LinkConfig:
    """Link emulation between adjacent stages (a real delay on the real transfers).
    profile: none (no emulation) | local | wifi | mobile | constrained | custom."""
    profile: str = "none"
    bandwidth_mbps: float | None = None  # overrides the profile's bandwidth (custom: required)
    latency_ms: float | None = None  # overrides the profile's one-way latency (custom: required)


LINK_PROFILE_NAMES = ("none", "local", "wifi", "mobile", "constrained", "custom")


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

        model = dict(d.get("model", {}))
        if isinstance(model.get("readout_adapter"), bool):  # run directories written before the kinds
            model["readout_adapter"] = "mlp" if model["readout_adapter"] else "none"
        return RunConfig(
            model=tuples(ModelConfig, model),
            data=tuples(DataConfig, d.get("data", {})),
            objective=tuples(ObjectiveConfig, d.get("objective", {})),
            train=tuples(TrainConfig, d.get("train", {})),
            link=tuples(LinkConfig, d.get("link", {})),
            out=d.get("out"),
        )


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def validate(cfg: RunConfig) -> None:
    """Checks everything that can be checked without loading the model (preflight.py adds what needs
    a look at the model's config and the dataset's files)."""
    from . import preflight  # imported here: preflight builds on this module
    from .schedule import schedulable
    rule = preflight.require  # a rule about a form field: its message is given the audience's words
    t, o, m, d = cfg.train, cfg.objective, cfg.model, cfg.data
    _require(t.runtime in METHODS_BY_RUNTIME,
             f"--runtime {t.runtime!r} is not one of {', '.join(METHODS_BY_RUNTIME)}")
    allowed = METHODS_BY_RUNTIME[t.runtime]
    _require(t.method in allowed,
             f"--method {t.method!r} is not available with --runtime {t.runtime} (choose {', '.join(allowed)})")
    for key in ("stages", "batch", "microbatches", "steps"):
        value = getattr(t, key)
        rule(value >= 1, key, lambda w, key=key, value=value: f"{w.name(key)} must be at least 1 (got {value})")
    rule(t.batch % t.microbatches == 0, "microbatches",
          lambda w: preflight.not_divisible(w, batch=t.batch, microbatches=t.microbatches))
    rule(math.isfinite(t.lr) and t.lr > 0, "lr", lambda w: f"{w.name('lr')} must be positive and finite (got {t.lr})")
    _require(t.weight_decay >= 0, f"--weight-decay must be >= 0 (got {t.weight_decay})")
    _require(t.eval_every >= 0, f"--eval-every must be >= 0 (got {t.eval_every})")
    _require(t.threads >= 0, f"--threads must be >= 0 (got {t.threads})")
    _require(t.device == "cpu" or t.device.startswith("cuda"),
             f"--device {t.device!r} is not 'cpu' or 'cuda[:N]'")
    rule(schedulable(t.method, stages=t.stages, microbatches=t.microbatches), "microbatches",
         lambda w: preflight.microbatches_below_stages(w, batch=t.batch, microbatches=t.microbatches, stages=t.stages))
    _require(t.ckpt_every >= 0, f"--ckpt-every must be >= 0 (got {t.ckpt_every})")
    _require(t.keep_checkpoints >= 2, f"--keep-checkpoints must be at least 2 (got {t.keep_checkpoints})")
    _require(t.warm_standby in WARM_STANDBY, f"--warm-standby must be one of {', '.join(WARM_STANDBY)} "
             f"(got {t.warm_standby!r})")
    _require(t.heartbeat_timeout_s >= MIN_HEARTBEAT_TIMEOUT_S,
             f"--heartbeat-timeout must be at least {MIN_HEARTBEAT_TIMEOUT_S:g} s (got {t.heartbeat_timeout_s:g}): "
             f"stages beat every {HEARTBEAT_INTERVAL_S:g} s, and a shorter timeout declares healthy stages dead")
    _require(t.max_restarts >= 0, f"--max-restarts must be >= 0 (got {t.max_restarts})")
    _require(t.stall_timeout_s == 0 or t.stall_timeout_s >= 5,
             f"--stall-timeout must be 0 (auto) or at least 5 s (got {t.stall_timeout_s:g})")
    _require(t.replay_buffer >= 0, f"--replay-buffer must be >= 0 (got {t.replay_buffer})")
    for text in t.failures:
        f = FailureSpec.parse(text)
        _require(t.runtime == "pipeline", "--fail needs --runtime pipeline")
        rule(0 <= f.stage < t.stages, "fail_stage", lambda w, f=f, text=text:
              f"{w.value('failures', repr(text))}: stage {f.stage} is not in 0..{t.stages - 1}")
        rule(1 <= f.step < t.steps, "fail_step", lambda w, f=f, text=text:
              f"{w.value('failures', repr(text))}: step {f.step} must be in 1..{t.steps - 1}")
        _require(t.method != "pipedream", PIPEDREAM_REFUSAL)  # before --ckpt-every: no checkpoint helps it
        _require(t.ckpt_every > 0, f"--fail {text!r} needs checkpoints to recover from: set --ckpt-every")
        if f.mode == "mid-ckpt":
            first_ckpt = -(-f.step // max(1, t.ckpt_every)) * max(1, t.ckpt_every)
            _require(t.ckpt_every == 0 or first_ckpt <= t.steps,
                     f"--fail {text!r}: no checkpoint is written at or after step {f.step} "
                     f"(--ckpt-every {t.ckpt_every}, --steps {t.steps}), so it could never fire")
    per_stage = {}
    for text in t.failures:
        f = FailureSpec.parse(text)
        per_stage[f.stage] = per_stage.get(f.stage, 0) + 1
    for stage, n in sorted(per_stage.items()):
        _require(n <= t.max_restarts, f"--fail injects {n} failures into stage {stage} but --max-restarts is "
                                      f"{t.max_restarts}: the run would end failed; raise --max-restarts")
    labels = [FailureSpec.parse(x).label for x in t.failures]
    _require(len(set(labels)) == len(labels), "--fail: the same failure is given twice")
    _require(t.inflight_depth >= 1, f"--inflight-depth must be at least 1 (got {t.inflight_depth})")
    _require(t.memory_budget_bytes >= 0, f"--memory-budget must be >= 0 (got {t.memory_budget_bytes})")
    lk = cfg.link
    _require(lk.profile in LINK_PROFILE_NAMES,
             f"--link {lk.profile!r} is not one of {', '.join(LINK_PROFILE_NAMES)}")
    _require(lk.profile != "custom" or (lk.bandwidth_mbps is not None and lk.latency_ms is not None),
             "--link custom needs --link-bandwidth-mbps and --link-latency-ms")
    _require(lk.bandwidth_mbps is None or lk.bandwidth_mbps > 0,
             f"--link-bandwidth-mbps must be positive (got {lk.bandwidth_mbps})")
    _require(lk.latency_ms is None or lk.latency_ms >= 0, f"--link-latency-ms must be >= 0 (got {lk.latency_ms})")
    _require(lk.profile == "none" or t.runtime == "pipeline", "--link emulation needs --runtime pipeline")
    _require(len(o.alpha) >= 1, "--alpha needs at least one value")
    for a in o.alpha:
        rule(0.0 < a <= 1.0, "alpha", lambda w, a=a: f"{w.value('alpha', a)} is outside (0, 1]")
    rule(len(o.alpha) in (1, t.stages), "alpha",
          lambda w: f"{w.name('alpha')} has {len(o.alpha)} values; give one, or one per stage ({t.stages})")
    if o.alpha_schedule:
        from .alpha_schedule import AlphaSchedule

        AlphaSchedule.parse(o.alpha_schedule)  # raises ConfigError with the reason
        _require(len(o.alpha) == 1, "--alpha-schedule sets α for every chunk: give no per-stage --alpha with it")
        _require(t.method == "zerolock", f"--alpha-schedule belongs to ZeroLock's local objective; "
                                         f"--method {t.method} has no α")
    _require(o.consistency in CONSISTENCY_DIRECTIONS,
             f"--consistency {o.consistency!r} is not one of {', '.join(CONSISTENCY_DIRECTIONS)}")
    _require(m.lora_rank >= 1, f"--lora-rank must be at least 1 (got {m.lora_rank})")
    _require(m.lora_alpha > 0, f"--lora-alpha must be positive (got {m.lora_alpha})")
    _require(len(m.lora_targets) >= 1, "--lora-targets needs at least one module name")
    _require(m.readout_adapter in READOUT_ADAPTERS,
             f"--readout-adapter {m.readout_adapter!r} is not one of {', '.join(READOUT_ADAPTERS)}")
    _require(m.readout_adapter == "none" or t.method == "zerolock",
             f"--readout-adapter belongs to ZeroLock's local objective; --method {t.method} has no local readout")
    _require(m.readout_adapter_hidden >= 1,
             f"--readout-adapter-hidden must be at least 1 (got {m.readout_adapter_hidden})")
    if m.boundaries is not None:
        _require(len(m.boundaries) == t.stages - 1,
                 f"--boundaries has {len(m.boundaries)} values; --stages {t.stages} needs {t.stages - 1}")
        _require(all(b > 0 for b in m.boundaries) and list(m.boundaries) == sorted(set(m.boundaries)),
                 f"--boundaries {list(m.boundaries)} must be strictly increasing layer indices > 0")
    rule(d.seq_len >= 8, "seq_len", lambda w: f"{w.name('seq_len')} must be at least 8 (got {d.seq_len})")
    rule(d.eval_size >= 0, "eval_size", lambda w: f"{w.name('eval_size')} must be >= 0 (got {d.eval_size})")


def replace(cfg: RunConfig, **sections: dict[str, Any]) -> RunConfig:
    """`replace(cfg, train={"steps": 3})`: a validated copy with some fields changed."""
    parts = {name: dataclasses.replace(getattr(cfg, name), **changes)
             for name, changes in sections.items() if name != "out"}
    if "out" in sections:
        parts["out"] = sections["out"]
    return dataclasses.replace(cfg, **parts)
