"""DualPipe-V's order of compute on one device for one window (DeepSeek-V3's DualPipe, folded into a V so
that each of D devices holds two chunks: chunk d on the way down and chunk 2D-1-d on the way back up).

The phases follow torch.distributed.pipelining's ScheduleDualPipeV (torch 2.13), which follows
deepseek-ai/DualPipe; ``tests/test_dualpipe_v.py`` compares the order with torch's for a grid of D and m.
In torch's words: F forward, I input gradient, W weight gradient, B a full backward (I and W at once), and
"overlap F/B" a forward of one chunk run together with a full backward of the other. Here a full backward is
``B`` then ``W`` of the same micro-batch (``B`` is always the input gradient in a split schedule), and an
overlapped pair runs its forward then its backward: the simulator has one compute stream per device, so the
overlap that hides communication on GPUs is not modelled.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator

from .action import Kind

DUALPIPE_V = "dualpipe-v"

# (stage, kind, micro-batch within the window)
Compute = tuple[int, Kind, int]


def dualpipe_v_placement(devices: int) -> tuple[int, ...]:
    """Device of each of the 2D chunks: 0, 1, .., D-1, D-1, .., 1, 0."""
    return tuple(range(devices)) + tuple(reversed(range(devices)))


class _Device:
    """One device's order being written: per (stage, kind) the next micro-batch, and the weight gradients
    held back (W after an input-gradient-only B, run later to fill a gap)."""

    def __init__(self) -> None:
        self.order: list[Compute] = []
        self.next: Counter[tuple[int, str]] = Counter()
        self.weights: deque[tuple[int, int]] = deque()

    def forward(self, stage: int) -> None:
        self.order.append((stage, Kind.F, self.next[stage, "F"]))
        self.next[stage, "F"] += 1

    def input_grad(self, stage: int) -> None:
        """B alone: its W waits in the queue."""
        j = self.next[stage, "B"]
        self.order.append((stage, Kind.B, j))
        self.weights.append((stage, j))
        self.next[stage, "B"] += 1

    def full_backward(self, stage: int) -> None:
        j = self.next[stage, "B"]
        self.order += [(stage, Kind.B, j), (stage, Kind.W, j)]
        self.next[stage, "B"] += 1

    def backward(self, stage: int, *, split: bool) -> None:
        (self.input_grad if split else self.full_backward)(stage)

    def held_weight(self) -> None:
        """The oldest held-back W, if any."""
        if self.weights:
            stage, j = self.weights.popleft()
            self.order.append((stage, Kind.W, j))

    def overlapped(self, forward: int, backward: int) -> None:
        self.forward(forward)
        self.full_backward(backward)


def dualpipe_v_window(devices: int, microbatches: int, device: int) -> Iterator[Compute]:
    """Device ``device``'s compute actions for one window of ``microbatches`` (>= 2 * devices)."""
    D, m, r = devices, microbatches, device
    assert m >= 2 * D and 0 <= r < D, (D, m, r)  # builders._checked refuses these with a ValueError
    down, up = r, 2 * D - 1 - r
    dev = _Device()
    for _ in range(2 * (D - r - 1)):  # 1: the down chunk's warm-up forwards
        dev.forward(down)
    for _ in range(r + 1):  # 2: forwards on both chunks
        dev.forward(down)
        dev.forward(up)
    for _ in range(D - r - 1):  # 3: the up chunk's first backwards, zero-bubble style
        dev.input_grad(up)
        dev.held_weight()
        dev.forward(up)
    for i in range(m - 2 * D + r + 1):  # 4: the steady state, a forward beside a backward
        if i == 0 and r == D - 1:  # the V's turn: not overlapped, to shorten the bubble
            dev.forward(down)
            dev.full_backward(up)
        else:
            dev.overlapped(down, up)
        dev.overlapped(up, down)
    for _ in range(D - r - 1):  # 5
        dev.full_backward(up)
        dev.overlapped(up, down)
    split = False  # 6: the last backwards, the second half split so that their W can fill the tail
    for i in range(r + 1):
        if i == (r + 1) // 2 and r % 2 == 1:
            split = True
        dev.backward(up, split=split)
        if i == (r + 1) // 2 and r % 2 == 0:
            split = True
        dev.backward(down, split=split)
    for _ in range(D - r - 1):  # 7
        dev.held_weight()
        dev.backward(down, split=split)
    for _ in range(r + 1):  # 8: the held-back weight gradients
        dev.held_weight()
    assert not dev.weights, f"device {r}: weight gradients never run: {list(dev.weights)}"
    yield from dev.order
