"""What each stage holds while it trains, counted from a model's shape, for the methods at any scale:
parameters, gradients, optimizer state and activations, per stage. A layer's counts are the engine's
(zerolock_core/train/layer_counts.py, which preflight's memory floor reads too); the rest are defined here.

* **Parameters**: the stage's frozen decoder layers, the embedding on stage 0, the final norm and LM head
  where the stage reads out (backprop: the last stage only; ZeroLock: every stage, a copy of its own; a tied
  head is the embedding itself on stage 0), a `top-lora:last` readout's copies of the model's top layers,
  all in the weights' precision; and the LoRA adapters in fp32.
* **Gradients**: the LoRA adapters' alone (fp32): nothing else trains.
* **Optimizer state**: AdamW's two moments per trainable parameter (fp32).
* **Activations**: what autograd saves for the backward of one micro-batch (`layer_activations`) times
  the micro-batches the stage holds at its peak (the schedule's `inflight_peak`: GPipe m, 1F1B K − s,
  ZeroLock 1), in the weights' precision.

The layers are split as the engine splits them (`chunk_bounds`: the extra layers first), a readout's
layers as the engine picks them (`ReadoutSpec`). Left out: the logits at the answer positions (b × V,
at most a few MiB), the hidden states in flight between stages, framework overheads.
"""
from __future__ import annotations

from dataclasses import dataclass

from zerolock_core.config.readout_spec import ReadoutSpec
from zerolock_core.method.chunks import chunk_bounds
from zerolock_core.schedule import build_schedule, inflight_peak, schedulable
from zerolock_core.train.layer_counts import (LORA_MODULES, embedding_weights, layer_activations, layer_weights,
                                               lora_weights)

from .model_shapes import MODEL_NAMES, CalcModel, calc_model

DEFAULT_TARGETS = ("q_proj", "v_proj")  # the engine's --lora-targets default
FP32 = 4  # bytes: the LoRA weights, their gradients and AdamW's moments
ADAM_MOMENTS = 2
PRECISIONS = {"bf16": 2, "fp32": 4}  # the frozen weights and the activations


@dataclass(kw_only=True, frozen=True)
class CalcMethod:
    label: str
    schedule: str  # its pipeline schedule (schedule/builders.py)
    readout: str  # --readout
    local: bool  # every chunk trains on a local loss (and reads out)


CALC_METHODS: dict[str, CalcMethod] = {
    "gpipe": CalcMethod(label="GPipe", schedule="gpipe", readout="head", local=False),
    "1f1b": CalcMethod(label="1F1B", schedule="1f1b", readout="head", local=False),
    "zerolock": CalcMethod(label="ZeroLock, head readout", schedule="zerolock", readout="head", local=True),
    "zerolock-top-lora": CalcMethod(label="ZeroLock, top-lora:last", schedule="zerolock", readout="top-lora:last",
                                    local=True),
}


@dataclass(kw_only=True, frozen=True)
class CalcSetting:
    """What the calculator is asked: a model (model_shapes.MODEL_NAMES), K, m, micro-batch size b,
    sequence length s, LoRA rank and targets, and the precision of the weights and activations."""
    model: str = "llama-2-7b"
    stages: int = 4
    microbatches: int = 8
    microbatch_size: int = 8
    seq_len: int = 512
    rank: int = 8
    targets: tuple[str, ...] = DEFAULT_TARGETS
    precision: str = "bf16"

    def __post_init__(self) -> None:
        if self.model not in MODEL_NAMES:
            raise ValueError(f"unknown model {self.model!r}; choose one of {', '.join(MODEL_NAMES)}")
        for name, low, high in (("stages", 1, 16), ("microbatches", 1, 64), ("microbatch_size", 1, 256),
                                ("seq_len", 1, 32768), ("rank", 1, 1024)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise ValueError(f"{name} must be a whole number in {low} … {high} (got {value!r})")
        if not self.targets or not set(self.targets) <= set(LORA_MODULES):
            raise ValueError(f"LoRA targets must be among {', '.join(LORA_MODULES)} (got {', '.join(self.targets)})")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)} (got {self.precision!r})")
        layers = self.calc_model.shape.layers
        if self.stages > layers:
            raise ValueError(f"K = {self.stages} stages needs at least one layer each: {self.calc_model.label} has "
                             f"{layers}")

    @property
    def calc_model(self) -> CalcModel:
        return calc_model(self.model)

    @property
    def tokens(self) -> int:
        """Tokens in one micro-batch."""
        return self.microbatch_size * self.seq_len


# --- the formulas, each once ----------------------------------------------------------------------

def head_weights(model: CalcModel, *, beside_embedding: bool) -> int:
    """The final norm and the LM head; a tied head beside its own embedding (stage 0) costs the norm alone."""
    return model.shape.hidden + (0 if model.tied and beside_embedding else embedding_weights(model.shape))


def model_weights(model: CalcModel) -> int:
    """Every parameter of the model once (as `sum(p.numel() for p in model.parameters())` counts them)."""
    return model.shape.layers * layer_weights(model.shape) + embedding_weights(model.shape) \
        + head_weights(model, beside_embedding=True)


def rope_activations(model: CalcModel, seq_len: int) -> int:
    """Elements a run of layers saves once for all its layers and every sequence of the micro-batch: the
    rotary cos and sin of each position."""
    return 2 * model.shape.head_dim * seq_len


# --- per stage ------------------------------------------------------------------------------------

@dataclass(kw_only=True, frozen=True)
class StageBytes:
    stage: int
    layers: int  # decoder layers of its chunk
    readout_layers: int  # copies of the model's layers its readout runs
    held: int  # micro-batches of activations held at the peak
    frozen: int  # parameters (count)
    trainable: int  # LoRA parameters (count)
    parameters: int  # bytes from here on
    gradients: int
    optimizer: int
    activations: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer + self.activations


PARTS = ("parameters", "gradients", "optimizer", "activations")
PART_WORDS = {"parameters": "parameters (frozen + LoRA)", "gradients": "gradients (LoRA)",
              "optimizer": "optimizer state (AdamW)", "activations": "activations at the peak"}


def held_microbatches(method: str, setting: CalcSetting) -> tuple[int, ...]:
    """Micro-batches each stage holds at its peak, read from the method's schedule."""
    sched = build_schedule(CALC_METHODS[method].schedule, stages=setting.stages, microbatches=setting.microbatches)
    return tuple(inflight_peak(sched, s) for s in range(setting.stages))


def why_not(method: str, setting: CalcSetting) -> str:
    """Why `method` has no schedule for this K and m ("" when it has one)."""
    schedule = CALC_METHODS[method].schedule
    if schedulable(schedule, stages=setting.stages, microbatches=setting.microbatches):
        return ""
    return f"{CALC_METHODS[method].label} needs m >= K (got m = {setting.microbatches}, K = {setting.stages})"


def stage_memory(method: str, setting: CalcSetting) -> tuple[StageBytes, ...]:
    """Bytes each stage holds at its peak under `method` (CALC_METHODS); ValueError where the method has no
    schedule for this K and m."""
    if method not in CALC_METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(CALC_METHODS)}")
    if why := why_not(method, setting):
        raise ValueError(why)
    m, model, k = CALC_METHODS[method], setting.calc_model, setting.stages
    wbytes = PRECISIONS[setting.precision]
    layers_in_model = model.shape.layers
    bounds = chunk_bounds(layers_in_model, k)
    spec = ReadoutSpec.of_model(m.readout, bounds)
    per_layer = layer_weights(model.shape)
    lora = lora_weights(model.shape, setting.rank, setting.targets)
    act_layer = layer_activations(model.shape, setting.rank, setting.targets)
    out = []
    for s, ((first, end), held) in enumerate(zip(bounds, held_microbatches(method, setting))):
        layers = end - first
        readout = spec.of_chunk(s, k, every_chunk_trains=m.local)
        extra = len(readout.layer_indices(layers_in_model, after=end))
        reads_out = m.local or s == k - 1
        frozen = (layers + extra) * per_layer + (embedding_weights(model.shape) if s == 0 else 0) \
            + (head_weights(model, beside_embedding=s == 0) if reads_out else 0)
        trainable = layers * lora + (extra * lora if readout.trains_layers else 0)
        runs = (1 if layers else 0) + (1 if extra else 0)  # runs of layers: the chunk's, the readout's
        per_microbatch = setting.tokens * (layers + extra) * act_layer + runs * rope_activations(model, setting.seq_len)
        out.append(StageBytes(stage=s, layers=layers, readout_layers=extra, held=held, frozen=frozen,
                              trainable=trainable,
                              # a track:P copy holds the last chunk's LoRA, frozen, in fp32
                              parameters=frozen * wbytes + (trainable + (extra * lora if readout.tracks else 0)) * FP32,
                              gradients=trainable * FP32, optimizer=ADAM_MOMENTS * trainable * FP32,
                              activations=held * per_microbatch * wbytes))
    return tuple(out)


def memory_plans(setting: CalcSetting) -> dict[str, tuple[StageBytes, ...] | str]:
    """Every method of CALC_METHODS: its stages' bytes, or why it has no schedule for this K and m."""
    return {m: why_not(m, setting) or stage_memory(m, setting) for m in CALC_METHODS}
