"""What crosses a ZeroLock stage boundary, as one tensor.

Without readout adapters: the hidden state h [b/m, S, d] itself. With them: h and the upstream
chunk's adapted readout rows at Ω ([|Ω|, d]) flattened into one 1-D tensor, so one send carries
both and the receiver (which knows |Ω| from the same micro-batch) splits it. The rows cost
|Ω|·d·4 bytes per micro-batch on top of h: about |Ω|/(b/m·S) more, a few per cent at seq 64.
"""
from __future__ import annotations

import math

import torch


def pack(h: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    if rows is None:
        return h.contiguous()
    assert rows.shape[-1] == h.shape[-1], (tuple(rows.shape), tuple(h.shape))
    return torch.cat([h.reshape(-1), rows.reshape(-1)])


def message_shape(hidden_shape: tuple[int, ...], rows: int) -> tuple[int, ...]:
    """The shape of a packed message: `hidden_shape`, or flat with `rows` adapted rows after h."""
    if rows == 0:
        return tuple(hidden_shape)
    return (math.prod(hidden_shape) + rows * hidden_shape[-1],)


def unpack(message: torch.Tensor, *, hidden_shape: tuple[int, ...],
           rows: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    if rows == 0:
        return message.view(hidden_shape), None
    n = math.prod(hidden_shape)
    assert message.numel() == n + rows * hidden_shape[-1], (message.numel(), hidden_shape, rows)
    return message[:n].view(hidden_shape), message[n:].view(rows, hidden_shape[-1])
