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


def load_final_weights(out: str | Path) -> dict[int, dict[str, torch.Tensor]]:
    """All chunks' final trainable weights of a run, keyed by chunk index."""
    found = sorted((Path(out) / "final").glob("chunk*.safetensors"))
    return {int(p.stem.removeprefix("chunk")): load_file(str(p)) for p in found}
