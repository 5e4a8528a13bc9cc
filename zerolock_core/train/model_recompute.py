"""The memory-halving recompute (method/recompute_layout.py) of a named model's split: the Run form's
"halve" and the frontier study's recompute arms, read from the model's depth without loading it."""
from __future__ import annotations

from ..method.chunks import chunk_bounds
from ..method.recompute_layout import memory_halving_recompute
from .model_shape import model_layers


def memory_halving_recompute_for(model: str, stages: int, boundaries: tuple[int, ...] | None) -> tuple[int, ...]:
    """memory_halving_recompute of `model`'s split into `stages` chunks at `boundaries` (None: even);
    ValueError when the model's depth is not known before it is loaded, or the split is not one."""
    layers = model_layers(model)
    if layers is None:
        raise ValueError(f"halving the activations needs the number of layers of {model}, which is not known "
                         "before it loads: give --recompute per stage instead")
    return memory_halving_recompute(tuple(end - first for first, end in chunk_bounds(layers, stages, boundaries)))
