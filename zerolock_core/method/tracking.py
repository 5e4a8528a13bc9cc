"""`--readout track:P`: every chunk before the last reads out through a frozen copy of the last chunk's
layers carrying the last chunk's own LoRA, pushed by the last stage every P steps.

The reference trainer and a pipeline stage do exactly this, so both compute the same numbers:

* the last chunk *publishes* its adapters as version v (the steps it had taken) after every step v with
  v % P == 0, and where it starts (a resumed run also republishes the versions its checkpoint kept);
* a chunk before the last *loads* version `tracked_version(s, P)` (readout_spec.py) before its step s:
  where it starts, and after each of its optimizer steps. That version is between P and 2P - 1 steps old,
  so a stage running ahead of the last one rarely waits for it, and never for data it has not sent;
* a `Board` carries the versions: in the reference trainer a dict (`MemoryBoard`), in a pipeline the
  coordinator's store (runtime/tracking_board.py: a safetensors file's bytes, a bounded wait);
* the last chunk's checkpoint keeps the versions a run resumed from it may still be asked for (those not
  older than `tracked_version` of its step), so a restart with a fresh store (torchrun) loses nothing.
"""
from __future__ import annotations

from typing import Protocol

import torch
from safetensors.torch import load as load_tensors, save as save_tensors

from ..config.readout_spec import ReadoutSpec, tracked_version
from ..methods import every_chunk_trains
from .chunks import Chunk

CHECKPOINT_PREFIX = "track/"  # the last chunk's checkpoint tensors: track/<version>/<name>


class Board(Protocol):
    def put(self, version: int, payload: bytes) -> None: ...

    def get(self, version: int) -> bytes: ...


class MemoryBoard:
    """The reference trainer's board: the chunks run in one process, one after another."""

    def __init__(self) -> None:
        self.versions: dict[int, bytes] = {}

    def put(self, version: int, payload: bytes) -> None:
        self.versions[version] = payload

    def get(self, version: int) -> bytes:
        assert version in self.versions, f"version {version} is published before a chunk needs it"
        return self.versions[version]


def payload_bytes(state: dict[str, torch.Tensor]) -> int:
    """The tensor bytes of one push (the safetensors header adds a few hundred)."""
    return sum(t.numel() * t.element_size() for t in state.values())


class Tracking:
    """One chunk's part in `track:P`: the last chunk publishes, a chunk with a tracking copy loads."""

    def __init__(self, chunk: Chunk, *, period: int, board: Board) -> None:
        assert period >= 1
        assert chunk.is_last or chunk.tracks, "only the last chunk and the tracking copies take part"
        self.chunk, self.period, self.board = chunk, period, board
        self.kept: dict[int, dict[str, torch.Tensor]] = {}  # published versions a restart may ask for
        self.loaded: int | None = None
        self.pushed_bytes = 0  # what this chunk put on the board (the last) or took from it (the others)

    @property
    def publishes(self) -> bool:
        return self.chunk.is_last

    def start(self, step: int, checkpoint: dict[str, torch.Tensor] | None = None) -> None:
        """Where a run (re)starts at `step`, after its checkpoint (if any) was restored."""
        if self.publishes:
            for version, state in sorted(_versions(checkpoint or {}).items()):
                self._publish(version, state)
            if step % self.period == 0:
                self._publish(step, self._own())
        else:
            self._load(tracked_version(step, self.period))

    def after_step(self, done: int) -> None:
        """After this chunk's optimizer step `done` (1-based): publish, or load what step `done` reads."""
        if self.publishes:
            if done % self.period == 0:
                self._publish(done, self._own())
        else:
            self._load(tracked_version(done, self.period))

    def checkpoint_tensors(self, step: int) -> dict[str, torch.Tensor]:
        """What the last chunk's checkpoint at `step` keeps: every version still to be read from there."""
        oldest = tracked_version(step, self.period)
        return {f"{CHECKPOINT_PREFIX}{v}/{name}": t for v, state in self.kept.items() if v >= oldest
                for name, t in state.items()} if self.publishes else {}

    def _own(self) -> dict[str, torch.Tensor]:
        return {name: p.detach().clone() for name, p in self.chunk.trainable_state().items()}

    def _publish(self, version: int, state: dict[str, torch.Tensor]) -> None:
        self.kept[version] = state
        oldest = tracked_version(version, self.period)
        self.kept = {v: s for v, s in self.kept.items() if v >= oldest}
        payload = save_tensors(state)
        self.board.put(version, payload)
        self.pushed_bytes += len(payload)

    def _load(self, version: int) -> None:
        if version == self.loaded:
            return
        payload = self.board.get(version)
        self.pushed_bytes += len(payload)
        state, mine = load_tensors(payload), self.chunk.tracked_state()
        assert state.keys() == mine.keys(), "the copy holds the last chunk's layers, LoRA for LoRA"
        with torch.no_grad():
            for name, p in mine.items():
                p.copy_(state[name])
        self.loaded = version


def _versions(tensors: dict[str, torch.Tensor]) -> dict[int, dict[str, torch.Tensor]]:
    out: dict[int, dict[str, torch.Tensor]] = {}
    for key, t in tensors.items():
        if key.startswith(CHECKPOINT_PREFIX):
            version, _, name = key[len(CHECKPOINT_PREFIX):].partition("/")
            out.setdefault(int(version), {})[name] = t
    return out


def tracking_of(chunk: Chunk, *, readout: str, method: str, board: Board) -> Tracking | None:
    """`chunk`'s part in a run of `--readout readout`, `--method method` (None: it takes no part)."""
    spec = ReadoutSpec.parse(readout)
    if not spec.tracks or not every_chunk_trains(method) or chunk.num_chunks < 2:
        return None
    return Tracking(chunk, period=spec.period, board=board)
