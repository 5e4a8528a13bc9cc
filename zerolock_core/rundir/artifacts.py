"""A run's trained weights (final/chunk{k}.safetensors, and a pipeline's `--eval-every` snapshots
snapshots/step{s}/chunk{k}.safetensors), written so that a crash never leaves a half-written file."""
from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from .run_dir import RunDir
from .shown_path import shown_path


def save_final_weights(out: str | Path, chunk_index: int, tensors: dict[str, torch.Tensor], *,
                       step: int | None = None) -> Path:
    return _save_weights(RunDir(out).final_weights(chunk_index), chunk_index, tensors, step=step)


def save_snapshot_weights(out: str | Path, chunk_index: int, tensors: dict[str, torch.Tensor], *, step: int) -> Path:
    """The chunk's trainable weights after `step`, for the final eval to score (a replayed step writes
    the same bytes again)."""
    return _save_weights(RunDir(out).snapshot_weights(step, chunk_index), chunk_index, tensors, step=step)


def _save_weights(path: Path, chunk_index: int, tensors: dict[str, torch.Tensor], *, step: int | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp),
                  metadata={"chunk": str(chunk_index), **({} if step is None else {"step": str(step)})})
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def final_weight_step(out: str | Path, chunk: int) -> int | None:
    """The optimizer step chunk `chunk`'s final/ weights are from (None: it has none, or they say no step)."""
    path = RunDir(out).final_weights(chunk)
    if not path.exists():
        return None
    with safe_open(str(path), framework="pt") as f:
        step = (f.metadata() or {}).get("step")
    return None if step is None else int(step)


def final_weight_steps(out: str | Path, chunks: int) -> list[int]:
    """The optimizer step each chunk's final/ weights are from ([] if some chunk has none)."""
    steps = [final_weight_step(out, k) for k in range(chunks)]
    return [] if None in steps else [int(s) for s in steps if s is not None]


def load_trained_weights(chunks, out: str | Path, *, snapshot: int | None = None) -> None:
    """Put a run's final trainable weights (or those of its snapshot after step `snapshot`) into
    `chunks` (each chunk's `index` names its file). Every trainable tensor must be there and every
    saved tensor must belong: a renamed adapter or a different K would otherwise be evaluated
    untrained without a word."""
    rd = RunDir(out)
    path_of = rd.final_weights if snapshot is None else (lambda k: rd.snapshot_weights(snapshot, k))
    weights = load_final_weights(out) if snapshot is None else {
        c.index: load_file(str(path_of(c.index))) for c in chunks if path_of(c.index).is_file()}
    for chunk in chunks:
        file = shown_path(path_of(chunk.index), within=(out,))  # final/chunkK.safetensors
        if chunk.index not in weights:
            raise FileNotFoundError(f"{Path(file).parent.as_posix()}/ has no weights for chunk {chunk.index}")
        saved = weights[chunk.index]
        missing = sorted(set(chunk.trainable_state()) - set(saved))
        if missing:
            raise ValueError(f"{file} lacks trainable tensor(s) {', '.join(missing[:3])}"
                             f"{' ...' if len(missing) > 3 else ''} (a different model, adapter or number of stages?)")
        unexpected = chunk.load_state_dict(saved, strict=False).unexpected_keys
        if unexpected:
            raise ValueError(f"{file} holds {', '.join(unexpected[:3])} that chunk {chunk.index} does not have "
                             f"(a different model or number of stages?)")


def load_final_weights(out: str | Path) -> dict[int, dict[str, torch.Tensor]]:
    """All chunks' final trainable weights of a run, keyed by chunk index."""
    return {k: load_file(str(p)) for k, p in RunDir(out).final_chunks().items()}
