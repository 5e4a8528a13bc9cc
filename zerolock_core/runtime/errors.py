"""The runtime's exceptions: each names one way a stage's work can end early."""
from __future__ import annotations


class StopRequested(Exception):
    """The coordinator asked this stage to stop."""


class LinkBroken(RuntimeError):
    """A send, receive or connect on a link failed: the peer's process died or the link timed out.
    Raised only by `Link` around the transport's own operations, so a bug elsewhere is never
    mistaken for a lost neighbour."""

    def __init__(self, link: int, generation: int, what: str, cause: BaseException) -> None:
        super().__init__(f"link {link} (generation {generation}): {what} failed: "
                         f"{type(cause).__name__}: {str(cause).strip().splitlines()[0] if str(cause).strip() else ''}")
        self.link, self.generation = link, generation


class LinkRebuilt(Exception):
    """A neighbour was replaced: the named link must be rebuilt at a new generation."""

    def __init__(self, side: str, gen: int) -> None:
        super().__init__(f"{side} link rebuilt at generation {gen}")
        self.side, self.gen = side, gen


class BufferExhausted(RuntimeError):
    """The replay buffer no longer holds what a replaced downstream stage needs."""


class MemoryBudgetExceeded(RuntimeError):
    """Measured activations went over --memory-budget (the CPU stand-in for a CUDA OOM)."""
