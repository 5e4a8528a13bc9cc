"""What one Llama decoder layer holds, counted from a model's shape (train/model_shape.py): its parameters,
its LoRA adapters' and the activations autograd saves for its backward. One definition of each, read by
the memory floor preflight checks (memory_need.py) and by the dashboard's memory calculator
(app/memory_calculator.py); the calculator's tests hold them to hand counts and to what autograd saves.
"""
from __future__ import annotations

from .model_shape import ModelShape

LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def q_width(shape: ModelShape) -> int:
    return shape.heads * shape.head_dim


def kv_width(shape: ModelShape) -> int:
    return shape.kv_heads * shape.head_dim


def linear_shapes(shape: ModelShape) -> dict[str, tuple[int, int]]:
    """(in, out) features of each linear of a decoder layer."""
    h, f, q, kv = shape.hidden, shape.intermediate, q_width(shape), kv_width(shape)
    return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
            "gate_proj": (h, f), "up_proj": (h, f), "down_proj": (f, h)}


def layer_weights(shape: ModelShape) -> int:
    """Parameters of one decoder layer: its seven linears (no bias) and two RMS norms."""
    return sum(i * o for i, o in linear_shapes(shape).values()) + 2 * shape.hidden


def lora_weights(shape: ModelShape, rank: int, targets: tuple[str, ...]) -> int:
    """LoRA parameters of one layer: A (r × in) and B (out × r) on each target."""
    return sum(rank * (i + o) for name, (i, o) in linear_shapes(shape).items() if name in targets)


def embedding_weights(shape: ModelShape) -> int:
    return shape.vocab * shape.hidden


def layer_activations(shape: ModelShape, rank: int, targets: tuple[str, ...]) -> int:
    """Elements autograd saves per token in one decoder layer whose frozen weights carry LoRA on `targets`
    (a frozen linear saves nothing for its input gradient; fused attention, so no s × s score matrix):
    each RMS norm its input and 1/rms; the normed input where an adapter reads it; each adapter its rank-r
    middle; attention its q, k, v, output and log-sum-exp; the MLP its gate, SiLU and up outputs; o's and
    down's inputs where they carry adapters."""
    t = set(targets)
    h, f = shape.hidden, shape.intermediate
    norms = 2 * (h + 1)
    adapter_inputs = (h if t & {"q_proj", "k_proj", "v_proj"} else 0) + (h if t & {"gate_proj", "up_proj"} else 0) \
        + (q_width(shape) if "o_proj" in t else 0) + (f if "down_proj" in t else 0)
    attention = 2 * q_width(shape) + 2 * kv_width(shape) + shape.heads
    return norms + adapter_inputs + rank * len(t) + attention + 3 * f
