"""`tinyllama-shape`: a TinyLlama-1.1B-shaped Llama with random weights (22 layers, hidden 2048,
32 heads / 4 KV heads, intermediate 5632, vocab 32000), built once with `save_pretrained`.

Random weights are fine for memory and speed. The embedded tiny tokenizer is reused: all its ids
are below 32000, which is all the model needs. Tests never build the full-size preset.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(kw_only=True, frozen=True)
class LlamaShape:
    layers: int = 22
    hidden: int = 2048
    heads: int = 32
    kv_heads: int = 4
    intermediate: int = 5632
    vocab: int = 32000
    max_positions: int = 2048


TINYLLAMA = LlamaShape()


def build_random_llama(path: Path, shape: LlamaShape, *, seed: int = 0) -> Path:
    """Write a random-weight Llama of `shape` + the tiny tokenizer to `path` (atomically)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from .locations import TINY_DIR

    tok = AutoTokenizer.from_pretrained(str(TINY_DIR))
    if len(tok) > shape.vocab:
        raise ValueError(f"vocab {shape.vocab} is smaller than the tiny tokenizer's {len(tok)} ids")
    cfg = LlamaConfig(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.max_positions,
        tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)  # half the disk; the loader upcasts
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / "zerolock_shape.json").write_text(json.dumps({**asdict(shape), "seed": seed}))
    path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, path)
    return path
