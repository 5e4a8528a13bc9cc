"""The shapes of the models the memory calculator counts: the embedded tiny model and SmolLM2-135M from
their local configs (transformers' AutoConfig), the others from their published configs' numbers.

Every one is a Llama: decoder layers of attention (q, k, v, o) and a gated MLP (gate, up, down), two RMS
norms a layer, a token embedding, a final norm and an LM head (the embedding itself where tied).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from zerolock_core.models.cache import models_dir
from zerolock_core.models.locations import TINY_DIR
from zerolock_core.models.random_llama import TINYLLAMA


@dataclass(kw_only=True, frozen=True)
class ModelShape:
    label: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool  # the LM head is the embedding matrix
    source: str  # where the numbers come from

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim


def _from_config(path: Path, *, label: str) -> ModelShape:
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(str(path))
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return ModelShape(label=label, layers=c.num_hidden_layers, hidden=c.hidden_size, intermediate=c.intermediate_size,
                      heads=c.num_attention_heads, kv_heads=c.num_key_value_heads, head_dim=head_dim,
                      vocab=c.vocab_size, tied=bool(c.tie_word_embeddings), source=f"AutoConfig of {path}")


SMOLLM2_SOURCE = "huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct config.json"
SMOLLM2 = ModelShape(label="SmolLM2-135M", layers=30, hidden=576, intermediate=1536, heads=9, kv_heads=3,
                     head_dim=64, vocab=49152, tied=True, source=SMOLLM2_SOURCE)
TINYLLAMA_SHAPE = ModelShape(label="TinyLlama-1.1B", layers=TINYLLAMA.layers, hidden=TINYLLAMA.hidden,
                             intermediate=TINYLLAMA.intermediate, heads=TINYLLAMA.heads, kv_heads=TINYLLAMA.kv_heads,
                             head_dim=TINYLLAMA.hidden // TINYLLAMA.heads, vocab=TINYLLAMA.vocab, tied=False,
                             source="huggingface.co/TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T "
                                    "config.json (zerolock_core/models/random_llama.py's TINYLLAMA)")
LLAMA2_7B = ModelShape(label="Llama-2-7B", layers=32, hidden=4096, intermediate=11008, heads=32, kv_heads=32,
                       head_dim=128, vocab=32000, tied=False,
                       source="huggingface.co/meta-llama/Llama-2-7b-hf config.json")


def _smollm2() -> ModelShape:
    """The converted local copy's config when `--model smollm2-135m` has been used here, else its numbers."""
    local = models_dir() / "smollm2-135m"
    return _from_config(local, label=SMOLLM2.label) if (local / "config.json").exists() else SMOLLM2


_BUILDERS = {
    "tiny": lambda: _from_config(TINY_DIR, label="tiny (embedded)"),
    "smollm2-135m": _smollm2,
    "tinyllama-1.1b": lambda: TINYLLAMA_SHAPE,
    "llama-2-7b": lambda: LLAMA2_7B,
}
MODEL_NAMES = tuple(_BUILDERS)


@functools.cache
def model_shape(name: str) -> ModelShape:
    if name not in _BUILDERS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    return _BUILDERS[name]()
