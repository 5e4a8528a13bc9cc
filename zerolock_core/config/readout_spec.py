"""How a chunk reads its hidden state out into a distribution over the vocabulary: `--readout`.

    head         the paper's frozen final norm + LM head
    affine       a tuned-lens style translator h + A h + b before the frozen head (trained, per chunk)
    mlp          the paper's option (b): a residual MLP before the frozen head (trained, per chunk)
    top:N        the model's own top N decoder layers (frozen), then the norm and head
    top-lora:N   the same N layers with LoRA of the chunk's own, trained by that chunk's local loss
                 (a per-chunk trainable top, as SegProp's trainable head)

N is a number of layers, or `last`: as many as the last chunk holds (the whole top of the model after
the last boundary, whatever K is) — what `zerolock bench depth` found to work at K = 3.

The last chunk's output *is* the top of the model: with `top:N` / `top-lora:N` it reads through the norm
and head alone, as the model does. Every readout but `head` changes the rows at Ω before the head, so a
stage ships its rows with its hidden state: the next chunk's consistency target is then exactly the
distribution this chunk trains (boundary.py).
"""
from __future__ import annotations

from dataclasses import dataclass

READOUT_KINDS = ("head", "affine", "mlp", "top", "top-lora")
TOP_KINDS = ("top", "top-lora")
ADAPTER_KINDS = ("affine", "mlp")
READOUT_CHOICES = "head | affine | mlp | top:N | top-lora:N"
LAST = "last"  # top:last: N = the last chunk's layers


@dataclass(kw_only=True, frozen=True)
class ReadoutSpec:
    kind: str
    layers: int = 0  # N of top:N / top-lora:N
    to_last: bool = False  # top:last, until resolved() knows the last chunk's size

    @staticmethod
    def parse(text: str) -> "ReadoutSpec":
        """"top:2" -> ReadoutSpec(kind="top", layers=2); ValueError naming the choices otherwise."""
        kind, colon, n = text.strip().partition(":")
        if kind in TOP_KINDS and colon and n.strip().isdigit():
            return ReadoutSpec(kind=kind, layers=int(n))
        if kind in TOP_KINDS and colon and n.strip() == LAST:
            return ReadoutSpec(kind=kind, to_last=True)
        if kind in READOUT_KINDS and not colon and kind not in TOP_KINDS:
            return ReadoutSpec(kind=kind)
        raise ValueError(f"{text!r} is not one of {READOUT_CHOICES} (N: a number of layers, e.g. top:2, "
                         f"or {LAST}: the last chunk's)")

    @staticmethod
    def of_model(text: str, bounds: list[tuple[int, int]]) -> "ReadoutSpec":
        """`text` for a model split at `bounds` (chunk_bounds): top:last becomes top:N, N the last chunk's layers."""
        spec = ReadoutSpec.parse(text)
        first, end = bounds[-1]
        return ReadoutSpec(kind=spec.kind, layers=end - first) if spec.to_last else spec

    @property
    def is_top(self) -> bool:
        """Reads through decoder layers of the model's top (N = 0 is the plain head)."""
        return self.kind in TOP_KINDS and (self.layers > 0 or self.to_last)

    @property
    def is_adapter(self) -> bool:
        return self.kind in ADAPTER_KINDS

    def of_chunk(self, chunk: int, stages: int, *, every_chunk_trains: bool) -> "ReadoutSpec":
        """What chunk `chunk` of `stages` reads through. The last chunk reads a top readout through the
        head alone (its output is the model's top). Where only the last chunk trains (BP, terminal), the
        chunks before it read through the plain head: a trained readout there would never be trained."""
        last = chunk == stages - 1
        if (self.is_top and last) or not (last or every_chunk_trains):
            return HEAD
        return self if (self.is_top or self.is_adapter) else HEAD

    @property
    def ships_rows(self) -> bool:
        """Whether a chunk with this readout sends its rows at Ω to the next chunk (its readout cannot be
        recomputed there from h alone: it holds trained weights, or layers the next stage runs anyway)."""
        return self.is_top or self.is_adapter


HEAD = ReadoutSpec(kind="head")
# what the project recommends once K >= 3 (README, "Local objectives at depth"): the frozen head cannot train
# an early chunk; reading through a copy of the last chunk's layers with LoRA of its own tracks BP at K = 3
# and K = 6 (the frozen copy, top:last, only at K = 3) — with more trainable parameters than BP's
RECOMMENDED_AT_DEPTH = "top-lora:last"

