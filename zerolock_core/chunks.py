"""Split a causal LM into K consecutive chunks, each trainable on its own.

A chunk owns a run of decoder layers (chunk 0 also the token embedding), its own copy of the
frozen final norm + LM head (the readout head), LoRA adapters on its layers, and optionally a
readout adapter. It rebuilds position ids, rotary embeddings and the causal/padding mask itself,
so only hidden states ever cross a chunk boundary.
"""
from __future__ import annotations

import math
import zlib
from typing import Iterator

import torch
from torch import nn

from .config import READOUT_ADAPTERS, ConfigError, ModelConfig


def chunk_bounds(num_layers: int, stages: int, boundaries: tuple[int, ...] | None = None) -> list[tuple[int, int]]:
    """[(first, end)) layer ranges of the K chunks; even split puts the extra layers first."""
    if not 1 <= stages <= num_layers:
        raise ConfigError(f"--stages {stages} must be between 1 and the model's {num_layers} layers")
    if boundaries is None:
        base, extra = divmod(num_layers, stages)
        sizes = [base + (1 if k < extra else 0) for k in range(stages)]
        starts = [sum(sizes[:k]) for k in range(stages)]
    else:
        if len(boundaries) != stages - 1 or list(boundaries) != sorted(set(boundaries)) \
                or boundaries[0] <= 0 or boundaries[-1] >= num_layers:
            raise ConfigError(f"--boundaries {list(boundaries)} must be {stages - 1} strictly increasing "
                              f"layer indices in 1..{num_layers - 1}")
        starts = [0, *boundaries]
    ends = [*starts[1:], num_layers]
    return list(zip(starts, ends))


class ReadoutAdapter(nn.Module):
    """The paper's option (b): h + down(silu(up(h))), exactly the identity at initialisation."""

    def __init__(self, hidden: int, inner: int, *, generator: torch.Generator) -> None:
        super().__init__()
        self.up = nn.Linear(hidden, inner)
        self.down = nn.Linear(inner, hidden)
        with torch.no_grad():
            bound = hidden ** -0.5
            self.up.weight.uniform_(-bound, bound, generator=generator)
            self.up.bias.zero_()
            self.down.weight.zero_()
            self.down.bias.zero_()

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.down(nn.functional.silu(self.up(h)))


class AffineTranslator(nn.Module):
    """A tuned-lens style translator: h + A h + b with A, b zero at initialisation (the identity)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.bias.zero_()

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.linear(h)


def make_readout_adapter(kind: str, hidden: int, inner: int, *, seed: int, chunk: int) -> nn.Module | None:
    """`none` | `mlp` (ReadoutAdapter) | `affine` (AffineTranslator); seeded per chunk."""
    if kind == "none":
        return None
    if kind == "mlp":
        return ReadoutAdapter(hidden, inner, generator=torch.Generator().manual_seed(seed * 1000 + chunk))
    if kind == "affine":
        return AffineTranslator(hidden)
    raise ValueError(f"readout adapter {kind!r} is not one of {', '.join(READOUT_ADAPTERS)}")


class Chunk(nn.Module):
    def __init__(self, *, index: int, num_chunks: int, layer_range: tuple[int, int], config,
                 layers: list[nn.Module], embed: nn.Module | None, rotary: nn.Module,
                 norm: nn.Module, lm_head: nn.Module, adapter: ReadoutAdapter | None) -> None:
        super().__init__()
        self.index, self.num_chunks, self.layer_range = index, num_chunks, layer_range
        self.config = config
        self.embed = embed
        first = layer_range[0]
        self.layers = nn.ModuleDict({str(first + i): layer for i, layer in enumerate(layers)})
        self.rotary = rotary
        self.norm = norm
        self.lm_head = lm_head
        self.readout_adapter = adapter

    @property
    def is_first(self) -> bool:
        return self.index == 0

    @property
    def is_last(self) -> bool:
        return self.index == self.num_chunks - 1

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """x: token ids [B, S] on chunk 0, else the previous chunk's hidden state [B, S, d]."""
        for h in self.layer_outputs(x, attention_mask):
            pass
        return h

    def layer_outputs(self, x: torch.Tensor, attention_mask: torch.Tensor) -> Iterator[torch.Tensor]:
        """The hidden state after each of this chunk's layers, in order (the logit lens reads them)."""
        from transformers.masking_utils import create_causal_mask

        h = self.embed(x) if self.embed is not None else x
        position_ids = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        mask = create_causal_mask(config=self.config, inputs_embeds=h, attention_mask=attention_mask,
                                  cache=None, position_ids=position_ids)
        rope = self.rotary(h, position_ids=position_ids)
        for layer in self.layers.values():
            out = layer(h, attention_mask=mask, position_ids=position_ids, position_embeddings=rope)
            h = out[0] if isinstance(out, tuple) else out
            yield h

    def readout(self, h: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """This chunk's logits (fp32) at the answer positions Ω only: [|Ω|, V]."""
        rows = h[positions]
        if self.readout_adapter is not None:
            rows = self.readout_adapter(rows)
        return self.lm_head(self.norm(rows)).float()

    @torch.no_grad()
    def readout_rows(self, h: torch.Tensor, positions: torch.Tensor) -> torch.Tensor | None:
        """What the next chunk needs to rebuild this chunk's readout exactly: the adapted rows at Ω
        ([|Ω|, d], shipped with the hidden state), or None without an adapter (it has h itself)."""
        if self.readout_adapter is None:
            return None
        return self.readout_adapter(h[positions])

    @torch.no_grad()
    def upstream_readout(self, h_prev: torch.Tensor, positions: torch.Tensor,
                         prev_rows: torch.Tensor | None = None) -> torch.Tensor:
        """p_{k-1}'s logits, recomputed here with the frozen head, from the upstream's adapted rows
        when it has a readout adapter (so the target is the distribution chunk k-1 trains), else
        from h_{k-1} at Ω: no vocabulary-sized tensor ever has to travel between stages."""
        rows = h_prev[positions] if prev_rows is None else prev_rows
        return self.lm_head(self.norm(rows)).float()

    def trainable_state(self) -> dict[str, torch.Tensor]:
        return {name: p for name, p in self.named_parameters() if p.requires_grad}


def build_chunks(model, cfg: ModelConfig, *, stages: int, seed: int, only: int | None = None) -> list[Chunk]:
    """Put LoRA on the chunks' layers and split `model` into them (only chunk `only`, if given:
    a stage process whose model holds only that chunk's layers, the others on meta).

    Every LoRA matrix is initialised from its own generator, seeded by (seed, layer, module), so
    the initial adapters depend neither on K nor on which layers a process holds: a run with
    K = 1 and K = 4, or a pipeline stage and the single-process reference, start from the same weights.
    """
    from peft import LoraConfig, inject_adapter_in_model

    base = getattr(model, "model", None)
    needed = ("layers", "embed_tokens", "norm", "rotary_emb")
    if base is None or not all(hasattr(base, n) for n in needed) or not hasattr(model, "lm_head"):
        raise ConfigError(f"model type {type(model).__name__} is not supported: ZeroLock needs a "
                          "Llama-style decoder (model.layers, embed_tokens, norm, rotary_emb, lm_head)")
    num_layers = len(base.layers)
    bounds = chunk_bounds(num_layers, stages, cfg.boundaries)
    lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=0.0,
                      target_modules=list(cfg.lora_targets), bias="none")

    chunks = []
    for k, (first, end) in enumerate(bounds):
        if only is not None and k != only:
            continue
        holder = nn.Module()  # module names as in the full model: layers.<i>.self_attn.q_proj
        holder.layers = nn.ModuleDict({str(i): base.layers[i] for i in range(first, end)})
        no_trainable = ConfigError(f"chunk {k} (layers {first}..{end - 1}) has no trainable parameter: "
                                   f"--lora-targets {','.join(cfg.lora_targets)} matches none of its modules")
        try:
            inject_adapter_in_model(lora, holder)
        except ValueError:  # peft: "Target modules ... not found in the base model"
            raise no_trainable from None
        _seed_lora(holder.layers, seed)
        layers = holder.layers
        for name, p in layers.named_parameters():
            p.requires_grad_("lora_" in name)
        adapter = make_readout_adapter(cfg.readout_adapter, model.config.hidden_size,
                                       cfg.readout_adapter_hidden, seed=seed, chunk=k)
        chunk = Chunk(index=k, num_chunks=stages, layer_range=(first, end), config=model.config,
                      layers=list(layers.values()), embed=base.embed_tokens if k == 0 else None,
                      rotary=base.rotary_emb, norm=base.norm, lm_head=model.lm_head, adapter=adapter)
        assert chunk.trainable_state(), "peft injected adapters, so the chunk has trainable parameters"
        chunks.append(chunk)
    return chunks


def _seed_lora(layers: nn.ModuleDict, seed: int) -> None:
    """peft's initialisation (A: Kaiming-uniform, B: zero), but each A from a generator of its own."""
    for name, module in layers.named_modules():
        lora_a = getattr(module, "lora_A", None)
        if not isinstance(lora_a, nn.ModuleDict):
            continue
        for adapter_name, linear in lora_a.items():
            g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(f"{name}/{adapter_name}".encode()))
            with torch.no_grad():
                nn.init.kaiming_uniform_(linear.weight, a=math.sqrt(5), generator=g)
                module.lora_B[adapter_name].weight.zero_()
