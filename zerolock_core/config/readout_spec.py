"""How a chunk reads its hidden state out into a distribution over the vocabulary: `--readout`.

    head         the paper's frozen final norm + LM head
    affine       a tuned-lens style translator h + A h + b before the frozen head (trained, per chunk)
    mlp          the paper's option (b): a residual MLP before the frozen head (trained, per chunk)
    top:N        the model's own top N decoder layers (frozen), then the norm and head
    top-lora:N   the same N layers with LoRA of the chunk's own, trained by that chunk's local loss
                 (a per-chunk trainable top, as SegProp's trainable head)
    sample:N     N of the model's layers after the chunk, spread evenly over the whole rest of the model down
                 to its last layer (`sampled_layers`; AugLocal's local heads), frozen, then the norm and head
    sample-lora:N  the same N layers with LoRA of the chunk's own, trained by that chunk's local loss
    track:P      a frozen copy of the last chunk's layers carrying the last chunk's own LoRA, pushed by the
                 last stage every P steps: during steps nP..nP+P-1 the copy holds what the last chunk had
                 after step (n-1)P (`tracked_version`; the first 2P steps: its initial adapters). No
                 trainable parameter of its own, so BP itself is its parameter-matched control

For top readouts N is a number of layers, or `last`: as many as the last chunk holds (the whole top of the
model after the last boundary, whatever K is) — what `zerolock bench depth` found to work at K = 3. For
sampled readouts N is a number >= 1, at most the last chunk's layers (the downstream of the chunk before it).

The last chunk's output *is* the top of the model: with a top or sampled readout it reads through the norm
and head alone, as the model does. Every readout but `head` changes the rows at Ω before the head, so a
stage ships its rows with its hidden state: the next chunk's consistency target is then exactly the
distribution this chunk trains (boundary.py).
"""
from __future__ import annotations

from dataclasses import dataclass

READOUT_KINDS = ("head", "affine", "mlp", "top", "top-lora", "sample", "sample-lora", "track")
TRACK = "track"  # the last chunk's layers with its current LoRA, pushed every P steps (method/tracking.py)
TOP_KINDS = ("top", "top-lora", TRACK)  # read through the model's top layers (track: always the last chunk's)
SAMPLE_KINDS = ("sample", "sample-lora")  # layers sampled over the chunk's downstream (`sampled_layers`)
LAYER_KINDS = TOP_KINDS + SAMPLE_KINDS  # read through copies of the model's decoder layers
LORA_KINDS = ("top-lora", "sample-lora")  # those copies with LoRA of the chunk's own
ADAPTER_KINDS = ("affine", "mlp")
READOUT_CHOICES = "head | affine | mlp | top:N | top-lora:N | sample:N | sample-lora:N | track:P"
LAST = "last"  # top:last: N = the last chunk's layers


def sampled_layers(after: int, num_layers: int, n: int) -> list[int]:
    """The N layers a `sample:N` / `sample-lora:N` readout of a chunk ending before layer `after` runs: the
    downstream layers after..num_layers-1 cut into N equal runs (M / N layers each, M = num_layers - after),
    the last layer of each: after - 1 + floor(i * M / N) for i = 1..N. So the model's last layer is always
    one, the layers are evenly spaced over the whole remaining depth, and N = M takes every downstream layer
    (the chunk just before the last: top-lora:last). E.g. downstream 10..29, N = 4 -> 14, 19, 24, 29."""
    m = num_layers - after
    if not 1 <= n <= m:
        raise ValueError(f"cannot sample {n} of the {m} layers after layer {after - 1}")
    return [after - 1 + (i * m) // n for i in range(1, n + 1)]


def tracked_version(step: int, period: int) -> int:
    """The last chunk's adapters a `track:P` copy holds during 0-based step `step`: those after step
    floor(step / P) * P - P (0: the initial ones). Between P and 2P - 1 steps old, so a stage ahead of the
    last by up to P steps never waits for them, and a pipeline computes exactly what the reference does."""
    assert period >= 1 and step >= 0, (period, step)
    return max(0, (step // period) * period - period)


@dataclass(kw_only=True, frozen=True)
class ReadoutSpec:
    kind: str
    layers: int = 0  # N of top:N / top-lora:N
    to_last: bool = False  # top:last, until resolved() knows the last chunk's size
    period: int = 0  # track:P's P, steps between two pushes of the last chunk's adapters

    @staticmethod
    def parse(text: str) -> "ReadoutSpec":
        """"top:2" -> ReadoutSpec(kind="top", layers=2); ValueError naming the choices otherwise."""
        kind, colon, n = text.strip().partition(":")
        if kind == TRACK and colon and n.strip().isdigit() and int(n) > 0:
            return ReadoutSpec(kind=kind, to_last=True, period=int(n))
        if kind == TRACK:
            raise ValueError(f"{text!r}: {TRACK}:P reads through the last chunk's layers with its LoRA, pushed "
                             f"every P >= 1 steps (a number, e.g. {TRACK}:4; one of {READOUT_CHOICES})")
        if kind in SAMPLE_KINDS and colon and n.strip().isdigit() and int(n) > 0:
            return ReadoutSpec(kind=kind, layers=int(n))
        if kind in SAMPLE_KINDS:
            raise ValueError(f"{text!r}: {kind}:N samples N >= 1 layers after each chunk (a number, e.g. "
                             f"{kind}:4; one of {READOUT_CHOICES})")
        if kind in TOP_KINDS and colon and n.strip().isdigit():
            return ReadoutSpec(kind=kind, layers=int(n))
        if kind in TOP_KINDS and colon and n.strip() == LAST:
            return ReadoutSpec(kind=kind, to_last=True)
        if kind in READOUT_KINDS and not colon and kind not in LAYER_KINDS:
            return ReadoutSpec(kind=kind)
        raise ValueError(f"{text!r} is not one of {READOUT_CHOICES} (N: a number of layers, e.g. top:2, "
                         f"or {LAST}: the last chunk's)")

    @staticmethod
    def of_model(text: str, bounds: list[tuple[int, int]]) -> "ReadoutSpec":
        """`text` for a model split at `bounds` (chunk_bounds): top:last becomes top:N, N the last chunk's layers."""
        spec = ReadoutSpec.parse(text)
        first, end = bounds[-1]
        return ReadoutSpec(kind=spec.kind, layers=end - first, period=spec.period) if spec.to_last else spec

    @property
    def is_top(self) -> bool:
        """Reads through decoder layers of the model's top (N = 0 is the plain head)."""
        return self.kind in TOP_KINDS and (self.layers > 0 or self.to_last)

    @property
    def reads_layers(self) -> bool:
        """Reads through copies of the model's decoder layers: a top readout, or a sampled one."""
        return self.is_top or (self.kind in SAMPLE_KINDS and self.layers > 0)

    @property
    def trains_layers(self) -> bool:
        """Those copies carry LoRA of the chunk's own (top-lora, sample-lora)."""
        return self.reads_layers and self.kind in LORA_KINDS

    def layer_indices(self, num_layers: int, *, after: int) -> list[int]:
        """The model's layers this readout copies, for a chunk whose layers end before `after`: a top
        readout's last N, a sampled one's `sampled_layers`; none for the others."""
        assert not self.to_last, "resolve top:last with ReadoutSpec.of_model first"
        if self.kind in SAMPLE_KINDS and self.reads_layers:
            return sampled_layers(after, num_layers, self.layers)
        return list(range(num_layers - self.layers, num_layers)) if self.is_top else []

    @property
    def tracks(self) -> bool:
        """A `track:P` copy: frozen LoRA on its layers, overwritten with the last chunk's every P steps."""
        return self.kind == TRACK

    @property
    def is_adapter(self) -> bool:
        return self.kind in ADAPTER_KINDS

    def of_chunk(self, chunk: int, stages: int, *, every_chunk_trains: bool) -> "ReadoutSpec":
        """What chunk `chunk` of `stages` reads through. The last chunk reads a top readout through the
        head alone (its output is the model's top). Where only the last chunk trains (BP, terminal), the
        chunks before it read through the plain head: a trained readout there would never be trained."""
        last = chunk == stages - 1
        if (self.reads_layers and last) or not (last or every_chunk_trains):
            return HEAD
        return self if (self.reads_layers or self.is_adapter) else HEAD

    @property
    def ships_rows(self) -> bool:
        """Whether a chunk with this readout sends its rows at Ω to the next chunk (its readout cannot be
        recomputed there from h alone: it holds trained weights, or layers the next stage runs anyway)."""
        return self.reads_layers or self.is_adapter


HEAD = ReadoutSpec(kind="head")
# ZeroLock's readout that holds backprop's accuracy at depth on the classification tasks (the depth study:
# the frozen head cannot train an early chunk; a copy of the last chunk's layers with LoRA of its own tracks
# BP at K = 3 and K = 6), with more trainable parameters and time per step than BP's. Not what the project
# recommends at depth: analysis/recommended.py
DEPTH_READOUT = "top-lora:last"

