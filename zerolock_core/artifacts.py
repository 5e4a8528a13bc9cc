"""Files a run leaves behind, written so that a crash never leaves a half-written one."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file


def write_json_atomic(path: str | Path, obj: Any) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def final_weights_path(out: str | Path, chunk_index: int) -> Path:
    return Path(out) / "final" / f"chunk{chunk_index}.safetensors"


def save_final_weights(out: str | Path, chunk_index: int, tensors: dict[str, torch.Tensor], *,
                       step: int | None = None) -> Path:
    path = final_weights_path(out, chunk_index)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp),
              metadata={"chunk": str(chunk_index), **({} if step is None else {"step": str(step)})})
    os.replace(tmp, path)
    return path


def load_trained_weights(chunks, out: str | Path) -> None:
    """Put a run's final trainable weights into `chunks` (each chunk's `index` names its file).
    Every trainable tensor must be there and every saved tensor must belong: a renamed adapter or a
    different K would otherwise be evaluated untrained without a word."""
    weights = load_final_weights(out)
    for chunk in chunks:
        if chunk.index not in weights:
            raise FileNotFoundError(f"{out}/final has no weights for chunk {chunk.index}")
        saved = weights[chunk.index]
        missing = sorted(set(chunk.trainable_state()) - set(saved))
        if missing:
            raise ValueError(f"{out}/final/chunk{chunk.index}.safetensors lacks trainable tensor(s) "
                             f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} "
                             "(a different model, adapter or number of stages?)")
        unexpected = chunk.load_state_dict(saved, strict=False).unexpected_keys
        if unexpected:
            raise ValueError(f"{out}/final/chunk{chunk.index}.safetensors holds {', '.join(unexpected[:3])} "
                             f"that chunk {chunk.index} does not have (a different model or number of stages?)")


def load_final_weights(out: str | Path) -> dict[int, dict[str, torch.Tensor]]:
    """All chunks' final trainable weights of a run, keyed by chunk index."""
    found = sorted((Path(out) / "final").glob("chunk*.safetensors"))
    return {int(p.stem.removeprefix("chunk")): load_file(str(p)) for p in found}
