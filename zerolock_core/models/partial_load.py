"""Load only the part of a causal LM that one stage runs.

The model is built on the meta device (no memory), then only the kept modules get real tensors
from the safetensors files: the kept decoder layers, the token embedding if asked for, and the
final norm + LM head every chunk reads out through. The other layers stay on meta and are never
read from disk. A tensor stored in the wanted dtype is used as a memory-mapped view of the file
(no copy: its pages are read when first used, and shared by the stage processes of one host);
one stored otherwise (bf16 on disk, fp32 wanted) is converted, that tensor only. Tied embeddings (SmolLM2) stay tied: with both kept they are one tensor,
and a stage without the embedding reads the head from the embedding's stored weights.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..config.field_words import ConfigError


@dataclass(kw_only=True, frozen=True)
class Keep:
    """What a process materialises: decoder layers [first, end), `also` these layers (a top readout's),
    and, optionally, the embedding."""
    first: int
    end: int
    embedding: bool
    also: tuple[int, ...] = ()


def safetensors_files(directory: Path) -> dict[str, Path]:
    """tensor name -> the safetensors file holding it ({} if the directory has none)."""
    index = directory / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        return {name: directory / file for name, file in weight_map.items()}
    single = directory / "model.safetensors"
    if not single.exists():
        return {}
    from safetensors import safe_open

    with safe_open(single, framework="pt") as fh:
        return {name: single for name in fh.keys()}


def load_partial(directory: Path, keep: Keep, *, dtype: torch.dtype) -> nn.Module:
    """A model whose kept modules hold real weights and whose other modules are on meta."""
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    files = safetensors_files(directory)
    if not files:
        raise ConfigError(f"{directory}: no safetensors weights to load a part of")
    config = AutoConfig.from_pretrained(directory)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=dtype)
    base = model.model
    if not 0 <= keep.first < keep.end <= len(base.layers) or not all(0 <= i < len(base.layers) for i in keep.also):
        raise ConfigError(f"layers {keep.first}..{keep.end - 1} (and {list(keep.also)}) are not all in the model's "
                          f"{len(base.layers)}")

    tied = bool(getattr(config, "tie_word_embeddings", False))
    wanted: dict[str, nn.Module] = {f"model.layers.{i}": base.layers[i]
                                    for i in sorted({*range(keep.first, keep.end), *keep.also})}
    wanted["model.norm"] = base.norm
    if keep.embedding:
        wanted["model.embed_tokens"] = base.embed_tokens
    if not (tied and keep.embedding):
        wanted["lm_head"] = model.lm_head

    by_file: dict[Path, list[tuple[nn.Module, str, bool, torch.Tensor, str]]] = {}
    for prefix, module in wanted.items():
        for local, tensor in [*module.named_parameters(), *module.named_buffers()]:
            name = f"{prefix}.{local}"
            stored = name
            if name == "lm_head.weight" and name not in files and tied:
                stored = "model.embed_tokens.weight"
            if stored not in files:
                raise ConfigError(f"{directory}: the weights have no tensor {stored!r}")
            owner_name, _, leaf = name.rpartition(".")
            owner = model.get_submodule(owner_name)
            by_file.setdefault(files[stored], []).append((owner, leaf, leaf in owner._parameters, tensor, stored))
    for file, items in by_file.items():
        with safe_open(file, framework="pt") as fh:
            for owner, leaf, is_param, meta, stored in items:
                value = fh.get_tensor(stored)  # memory-mapped: no page is read until it is used
                if value.shape != meta.shape:
                    raise ConfigError(f"{directory}: {stored} has shape {tuple(value.shape)}, "
                                      f"the config says {tuple(meta.shape)}")
                if value.dtype != meta.dtype:  # a converted copy (e.g. bf16 on disk, fp32 wanted)
                    value = value.to(meta.dtype)
                # Stored in the right dtype, the weight stays a view of the file: its pages are read on
                # first use and shared (page cache) by every stage process on the host.
                if is_param:
                    owner._parameters[leaf] = nn.Parameter(value, requires_grad=False)
                else:
                    owner._buffers[leaf] = value
    if tied and keep.embedding:
        model.lm_head.weight = base.embed_tokens.weight  # one tensor, as in the full model
    # Rotary frequencies are a non-persistent buffer computed at construction: rebuild on CPU.
    base.rotary_emb = type(base.rotary_emb)(config=config)
    return model


def materialised_keys(model: nn.Module) -> set[str]:
    """Names of the parameters that hold real data (not meta): what this process loaded."""
    return {n for n, p in model.named_parameters(remove_duplicate=False) if not p.is_meta}
