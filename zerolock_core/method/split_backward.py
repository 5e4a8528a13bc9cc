"""A backward split in two (zero bubble, zb-h1): B computes the input gradient, W later the weights'.

B runs the backward from the stage's output to its input only, keeping the graph (retain_graph) and
recording the gradient that arrives where each trainable weight joins that path; W then runs just the
weights' part from those recorded gradients and adds it to ``.grad``. Under LoRA the trainable weights
are the adapters, so W is their two small products per adapted module, not a second backward through
the frozen layers. Both halves are the operations of one ordinary backward, so a split run's weights
equal a full-backward run's (tests/test_zero_bubble_runtime.py).

The graph walking is torch's own (torch.distributed.pipelining._backward, a private module since torch
2.4: its zero-bubble schedules' B and W), used here as it is rather than written again.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight

WeightGradient = Callable[[], None]  # W: run once, after its B; frees the graph B kept


def input_gradient(root: torch.Tensor, grad: torch.Tensor | None, h_in: torch.Tensor | None,
                   params: Sequence[torch.nn.Parameter]) -> WeightGradient:
    """B: ``h_in.grad`` from ``root`` (the stage's output with its gradient ``grad``, or the last
    stage's loss with ``grad`` None); returns W. Without an input that needs a gradient (stage 0:
    token ids) nobody waits on B, and W runs the whole backward."""
    if h_in is None or not h_in.requires_grad:
        return lambda: root.backward(grad)
    _, groups = stage_backward_input([root], None if grad is None else [grad], [h_in], iter(params))
    return lambda: stage_backward_weight(iter(params), groups)
