"""Split a causal LM into K consecutive chunks, each trainable on its own.

A chunk owns a run of decoder layers (chunk 0 also the token embedding), its own copy of the
frozen final norm + LM head (the readout head), LoRA adapters on its layers, and what its readout
adds before the head (`--readout`, readout_spec.py): an adapter, or a copy of the model's top layers.
It rebuilds position ids, rotary embeddings and the causal/padding mask itself, so only hidden states
(and a readout's rows at Ω) ever cross a chunk boundary.
"""
from __future__ import annotations

import copy
import math
import zlib
from typing import Iterator

import torch
from torch import nn

from .balance import ChunkCosts, balanced_boundaries, is_auto
from ..config.run_config import ModelConfig
from ..config.run_fields import recomputed_layers
from ..config.field_words import ConfigError, FieldError
from ..config.readout_spec import ADAPTER_KINDS, SAMPLE_KINDS, ReadoutSpec
from ..methods import every_chunk_trains as every_chunk_trains_with


def chunk_bounds(num_layers: int, stages: int, boundaries: tuple[int, ...] | None = None,
                 speeds: tuple[float, ...] = (), *, readout_layers: int = 0, costs: ChunkCosts | None = None,
                 every_chunk_reads_out: bool = True) -> list[tuple[int, int]]:
    """[(first, end)) layer ranges of the K chunks; even split puts the extra layers first; AUTO
    (`--boundaries auto`): balanced for stages of `speeds` (default: all 1) on `costs` (default: the
    uniform estimate), every chunk before the last also running `readout_layers` top layers for its
    readout (balance.py)."""
    if not 1 <= stages <= num_layers:
        raise ConfigError(f"--stages {stages} must be between 1 and the model's {num_layers} layers")
    if is_auto(boundaries):
        costs = costs or ChunkCosts.uniform(num_layers)
        assert len(costs.layers) == num_layers, "costs measured on this model"
        try:
            boundaries = balanced_boundaries(costs, speeds or (1.0,) * stages, readout_layers=readout_layers,
                                             every_chunk_reads_out=every_chunk_reads_out)
        except ValueError as err:
            raise ConfigError(f"--boundaries auto: {err}") from None
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


def planned_bounds(num_layers: int, stages: int, *, boundaries: tuple[int, ...] | None,
                   speeds: tuple[float, ...], readout: str, method: str,
                   costs: ChunkCosts | None = None) -> list[tuple[int, int]]:
    """The run's chunks: `chunk_bounds` with what `--boundaries auto` must weigh of `--readout` and the
    method — under a method where every chunk trains, every chunk reads out, and a `top:N` / `sample:N`
    readout runs N more layers on every chunk before the last. `top:last` is refused there: its N is the last
    chunk's size, which balancing would shrink, and with it the readout. `costs`: measured (auto_boundaries.py,
    which a run's config then holds the result of); without, the uniform estimate (a preview)."""
    spec = ReadoutSpec.parse(readout)
    auto = is_auto(boundaries)
    if auto and spec.is_top and every_chunk_trains_with(method) and spec.to_last:
        raise FieldError("boundaries", lambda w: f"{w.value('boundaries', 'auto')} cannot balance "
                                                 f"{w.value('readout', readout)}: its N is the last chunk's size, "
                                                 "which balancing would shrink and the readout with it; name N "
                                                 f"({spec.kind}:N) or the boundaries")
    return chunk_bounds(num_layers, stages, boundaries, speeds, costs=costs,
                        every_chunk_reads_out=every_chunk_trains_with(method),
                        readout_layers=weighed_readout_layers(readout, method) if auto else 0)


def weighed_readout_layers(readout: str, method: str) -> int:
    """The layers a `top:N` / `sample:N` readout adds to every chunk before the last: N where every chunk
    trains (and reads out through them), else 0. Balancing weighs them as the model's top N layers' costs
    (balance.py): a sampled readout's layers depend on the cut, but decoder layers of one shape cost the
    same, and its constraint is a top readout's (the chunk before the last samples the last chunk's layers,
    so the last holds at least N)."""
    spec = ReadoutSpec.parse(readout)
    return spec.layers if spec.reads_layers and every_chunk_trains_with(method) else 0


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


def make_readout_adapter(kind: str, hidden: int, inner: int, *, seed: int, chunk: int) -> nn.Module:
    """`mlp` (ReadoutAdapter) | `affine` (AffineTranslator); seeded per chunk."""
    if kind == "mlp":
        return ReadoutAdapter(hidden, inner, generator=torch.Generator().manual_seed(seed * 1000 + chunk))
    if kind == "affine":
        return AffineTranslator(hidden)
    raise ValueError(f"readout adapter {kind!r} is not one of {', '.join(ADAPTER_KINDS)}")


def run_layers(layers: nn.ModuleDict, h: torch.Tensor, attention_mask: torch.Tensor, *, config,
               rotary: nn.Module, recompute: int = 0) -> Iterator[torch.Tensor]:
    """The hidden state after each of `layers` in order, from the embedded sequence `h` [B, S, d]: the
    position ids, rotary embeddings and causal/padding mask are rebuilt here (nothing else crosses).
    The first `recompute` layers (--recompute), when a graph is built, keep only their input for the
    backward, which runs their forward again: torch's non-reentrant checkpoint, which restores the RNG
    state and recomputes the same ops on the same inputs, so the gradients are the same bit for bit."""
    from torch.utils.checkpoint import checkpoint
    from transformers.masking_utils import create_causal_mask

    position_ids = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
    mask = create_causal_mask(config=config, inputs_embeds=h, attention_mask=attention_mask,
                              cache=None, position_ids=position_ids)
    rope = rotary(h, position_ids=position_ids)
    for i, layer in enumerate(layers.values()):
        kwargs = dict(attention_mask=mask, position_ids=position_ids, position_embeddings=rope)
        if i < recompute and torch.is_grad_enabled():
            out = checkpoint(_bound(layer), h, use_reentrant=False, **kwargs)
        else:
            out = layer(h, **kwargs)
        h = out[0] if isinstance(out, tuple) else out
        yield h


def _bound(layer: nn.Module):
    """`layer` bound to the tensors it holds now: a backward's recompute then runs with the weights the
    forward used, also where those were a PipeDream weight version swapped in for the forward alone
    (runtime/weight_stash.py's functional_call), not the live ones an optimizer step has since changed."""
    from torch.func import functional_call

    tensors = {**dict(layer.named_parameters()), **dict(layer.named_buffers())}
    return lambda *args, **kwargs: functional_call(layer, tensors, args, kwargs, strict=False)


class TopReadout(nn.Module):
    """`top:N` / `top-lora:N` / `sample:N` / `sample-lora:N`: a chunk's own copy of N of the model's decoder
    layers after it (its top N, or N sampled over its downstream), run in order on the chunk's whole output
    sequence (attention reads every earlier position) before the norm and head."""

    def __init__(self, layers: nn.ModuleDict, *, config, rotary: nn.Module) -> None:
        super().__init__()
        self.layers = layers  # named by their index in the model, as in a chunk
        self.config = config
        self.rotary = rotary

    def forward(self, h: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        for h in run_layers(self.layers, h, attention_mask, config=self.config, rotary=self.rotary):
            pass
        return h


class Chunk(nn.Module):
    def __init__(self, *, index: int, num_chunks: int, layer_range: tuple[int, int], config,
                 layers: list[nn.Module], embed: nn.Module | None, rotary: nn.Module,
                 norm: nn.Module, lm_head: nn.Module, adapter: nn.Module | None = None,
                 top: TopReadout | None = None, receives_readout: bool = False, tracks: bool = False,
                 recompute_layers: int = 0) -> None:
        super().__init__()
        assert 0 <= recompute_layers <= len(layers), "checked against the chunk's layers (build_chunks)"
        self.recompute_layers = recompute_layers  # its first layers' activations, recomputed in the backward
        assert adapter is None or top is None, "one readout per chunk"
        self.index, self.num_chunks, self.layer_range = index, num_chunks, layer_range
        self.config = config
        self.embed = embed
        first = layer_range[0]
        self.layers = nn.ModuleDict({str(first + i): layer for i, layer in enumerate(layers)})
        self.rotary = rotary
        self.norm = norm
        self.lm_head = lm_head
        self.readout_adapter = adapter
        self.readout_top = top
        # the upstream chunk's readout changes its rows: they arrive with its hidden state (boundary.py)
        self.receives_readout = receives_readout
        assert not tracks or top is not None, "a track:P readout is a copy of the last chunk's layers"
        self.tracks = tracks  # `top`'s LoRA is the last chunk's, pushed every P steps (tracking.py)

    @property
    def ships_readout(self) -> bool:
        """Whether this chunk's readout rows go to the next chunk (its readout is not the plain head)."""
        return self.readout_adapter is not None or self.readout_top is not None

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
        h = self.embed(x) if self.embed is not None else x
        yield from run_layers(self.layers, h, attention_mask, config=self.config, rotary=self.rotary,
                              recompute=self.recompute_layers)

    def _rows(self, h: torch.Tensor, positions: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """The rows at Ω [|Ω|, d] the head reads: h's own, adapted, or out of the top layers."""
        if self.readout_top is not None:
            assert attention_mask is not None, "a top-layer readout runs the sequence: pass its attention mask"
            return self.readout_top(h, attention_mask)[positions]
        rows = h[positions]
        return rows if self.readout_adapter is None else self.readout_adapter(rows)

    def readout(self, h: torch.Tensor, positions: torch.Tensor,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """This chunk's logits (fp32) at the answer positions Ω only: [|Ω|, V]. `attention_mask` [B, S] is
        needed by a top-layer readout only."""
        return self.lm_head(self.norm(self._rows(h, positions, attention_mask))).float()

    @torch.no_grad()
    def readout_rows(self, h: torch.Tensor, positions: torch.Tensor,
                     attention_mask: torch.Tensor | None = None) -> torch.Tensor | None:
        """What the next chunk needs to rebuild this chunk's readout exactly: the rows at Ω its head
        reads ([|Ω|, d], shipped with the hidden state), or None for the plain head (it has h itself)."""
        return self._rows(h, positions, attention_mask) if self.ships_readout else None

    @torch.no_grad()
    def upstream_readout(self, h_prev: torch.Tensor, positions: torch.Tensor,
                         prev_rows: torch.Tensor | None = None) -> torch.Tensor:
        """p_{k-1}'s logits, recomputed here with the frozen head, from the upstream's rows when its
        readout is not the plain head (so the target is the distribution chunk k-1 trains), else
        from h_{k-1} at Ω: no vocabulary-sized tensor ever has to travel between stages."""
        rows = h_prev[positions] if prev_rows is None else prev_rows
        return self.lm_head(self.norm(rows)).float()

    def trainable_state(self) -> dict[str, torch.Tensor]:
        return {name: p for name, p in self.named_parameters() if p.requires_grad}

    def tracked_state(self) -> dict[str, torch.Tensor]:
        """A `track:P` readout's copy of the last chunk's LoRA, named as the last chunk names its own
        (`layers.<i>....lora_A.default.weight`): what a push overwrites. Empty for any other readout."""
        if not self.tracks:
            return {}
        return {f"layers.{name}": p for name, p in self.readout_top.layers.named_parameters() if "lora_" in name}


def readout_layer_indices(num_layers: int, spec: ReadoutSpec, bounds: list[tuple[int, int]],
                          chunk: int) -> list[int]:
    """The model's layers chunk `chunk`'s readout `spec` (of_chunk's) copies: a top readout's last N, a
    sampled one's N spread over the layers after the chunk (readout_spec.sampled_layers); none else."""
    return spec.layer_indices(num_layers, after=bounds[chunk][1])


def check_readout_fits(readout: str, bounds: list[tuple[int, int]]) -> None:
    """A top readout reads through layers of the last chunk only: were N larger, a chunk before the last
    would read through layers of its own or of the chunks between (its own output fed to itself again).
    A sampled readout samples the layers after its chunk: the chunk before the last has the last chunk's."""
    spec = ReadoutSpec.of_model(readout, bounds)
    first, end = bounds[-1]
    if spec.reads_layers and spec.layers > end - first:
        sampled = spec.kind in SAMPLE_KINDS
        what = "samples" if sampled else "reads through"
        which = "layers after each chunk but the chunk before the last has only the last chunk's" if sampled \
            else "top layers but the last chunk holds"
        raise FieldError("readout", lambda w: f"{w.value('readout', readout)} {what} {spec.layers} {which} "
                                              f"{end - first} (layers {first}..{end - 1}): "
                                              f"N can be at most {end - first}, or fewer stages")


def build_chunks(model, cfg: ModelConfig, *, stages: int, seed: int, only: int | None = None,
                 method: str = "zerolock", speeds: tuple[float, ...] = ()) -> list[Chunk]:
    """Put LoRA on the chunks' layers and split `model` into them (only chunk `only`, if given:
    a stage process whose model holds only that chunk's layers, the others on meta). `method` decides
    which chunks get the `--readout` (readout_spec.ReadoutSpec.of_chunk): every chunk for zerolock.

    Every LoRA matrix is initialised from its own generator, seeded by (seed, layer, module), so
    the initial adapters depend neither on K nor on which layers a process holds: a run with
    K = 1 and K = 4, or a pipeline stage and the single-process reference, start from the same weights.
    """
    from peft import LoraConfig

    base = getattr(model, "model", None)
    needed = ("layers", "embed_tokens", "norm", "rotary_emb")
    if base is None or not all(hasattr(base, n) for n in needed) or not hasattr(model, "lm_head"):
        raise ConfigError(f"model type {type(model).__name__} is not supported: ZeroLock needs a "
                          "Llama-style decoder (model.layers, embed_tokens, norm, rotary_emb, lm_head)")
    num_layers = len(base.layers)
    bounds = planned_bounds(num_layers, stages, boundaries=cfg.boundaries, speeds=speeds, readout=cfg.readout,
                            method=method)
    lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=0.0,
                      target_modules=list(cfg.lora_targets), bias="none")
    check_readout_fits(cfg.readout, bounds)
    recompute = recomputed_layers(cfg.recompute, stages)
    over = [k for k, (n, (first, end)) in enumerate(zip(recompute, bounds)) if n > end - first]
    if over:
        k = over[0]
        raise FieldError("recompute", lambda w: f"{w.value('recompute', ','.join(map(str, cfg.recompute)))} "
                                                f"recomputes {recompute[k]} layers of chunk {k}, which has "
                                                f"{bounds[k][1] - bounds[k][0]}")
    spec = ReadoutSpec.of_model(cfg.readout, bounds)
    every_chunk_trains = every_chunk_trains_with(method)
    readouts = [spec.of_chunk(k, stages, every_chunk_trains=every_chunk_trains) for k in range(stages)]
    built = [k for k in range(stages) if only is None or k == only]
    # the top / sampled readouts copy the model's own layers before any LoRA goes onto them
    copied = {k: readout_layer_indices(num_layers, readouts[k], bounds, k) for k in built}
    pristine = {i: copy.deepcopy(base.layers[i]) for i in sorted({i for k in built for i in copied[k]})}

    chunks = []
    for k in built:
        first, end = bounds[k]
        layers = _with_lora(nn.ModuleDict({str(i): base.layers[i] for i in range(first, end)}), lora, seed=seed,
                            salt="", what=f"chunk {k} (layers {first}..{end - 1})", targets=cfg.lora_targets)
        readout = readouts[k]
        adapter = make_readout_adapter(readout.kind, model.config.hidden_size, cfg.readout_adapter_hidden,
                                       seed=seed, chunk=k) if readout.is_adapter else None
        top = None
        if readout.reads_layers:
            copies = nn.ModuleDict({str(i): copy.deepcopy(pristine[i]) for i in copied[k]})
            if readout.trains_layers:  # LoRA of this chunk's own, seeded apart from the model's
                copies = _with_lora(copies, lora, seed=seed, salt=f"readout{k}/", what=f"chunk {k}'s readout",
                                    targets=cfg.lora_targets)
            elif readout.tracks:  # the last chunk's LoRA, seeded as the last chunk's: its initial adapters
                copies = _with_lora(copies, lora, seed=seed, salt="", what=f"chunk {k}'s readout",
                                    targets=cfg.lora_targets)
            if not readout.trains_layers:
                copies.requires_grad_(False)
            top = TopReadout(copies, config=model.config, rotary=base.rotary_emb)
        chunk = Chunk(index=k, num_chunks=stages, layer_range=(first, end), config=model.config,
                      layers=list(layers.values()), embed=base.embed_tokens if k == 0 else None,
                      rotary=base.rotary_emb, norm=base.norm, lm_head=model.lm_head, adapter=adapter, top=top,
                      receives_readout=every_chunk_trains and k > 0 and readouts[k - 1].ships_rows,
                      tracks=readout.tracks, recompute_layers=recompute[k])
        assert chunk.trainable_state(), "peft injected adapters, so the chunk has trainable parameters"
        chunks.append(chunk)
    return chunks


def _with_lora(layers: nn.ModuleDict, lora, *, seed: int, salt: str, what: str,
               targets: tuple[str, ...]) -> nn.ModuleDict:
    """`layers` with LoRA injected (module names as in the full model: layers.<i>.self_attn.q_proj),
    seeded per (seed, salt, name); only the LoRA weights train."""
    from peft import inject_adapter_in_model

    holder = nn.Module()
    holder.layers = layers
    try:
        inject_adapter_in_model(lora, holder)
    except ValueError:  # peft: "Target modules ... not found in the base model"
        raise ConfigError(f"{what} has no trainable parameter: --lora-targets {','.join(targets)} matches "
                          f"none of its modules") from None
    _seed_lora(holder.layers, seed, salt=salt)
    for name, p in holder.layers.named_parameters():
        p.requires_grad_("lora_" in name)
    return holder.layers


def _seed_lora(layers: nn.ModuleDict, seed: int, *, salt: str = "") -> None:
    """peft's initialisation (A: Kaiming-uniform, B: zero), but each A from a generator of its own."""
    for name, module in layers.named_modules():
        lora_a = getattr(module, "lora_A", None)
        if not isinstance(lora_a, nn.ModuleDict):
            continue
        for adapter_name, linear in lora_a.items():
            g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(f"{salt}{name}/{adapter_name}".encode()))
            with torch.no_grad():
                nn.init.kaiming_uniform_(linear.weight, a=math.sqrt(5), generator=g)
                module.lora_B[adapter_name].weight.zero_()
