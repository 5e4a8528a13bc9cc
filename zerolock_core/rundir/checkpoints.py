"""Per-stage checkpoints as a commit protocol, one format for both runtimes: a pipeline stage's, and
each chunk's of a reference run (train/reference_checkpoint.py) — here, below both, so each can use it.

A checkpoint is a directory `step{NNNNNNNN}/` in its stage's folder (`RunDir.stage_checkpoints`)
holding `tensors.safetensors` (trainable weights, optimizer state, RNG state) and `meta.json` (step,
micro-batch cursor, optimizer hyper-parameters, replay watermark). Commit: both files are written and fsynced, then
`MANIFEST.json` with their SHA-256 is written to a temporary name, fsynced, moved into place with
`os.replace`, and the directory is fsynced. A checkpoint without a manifest does not exist.

The loader takes the newest checkpoint whose manifest verifies and falls back to older ones,
saying why (truncated file, missing manifest, flipped byte). Nothing is ever unpickled.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors.torch import load_file, save_file

from .file_digest import file_sha256
from .run_dir import RunDir
from .shown_path import shown_path

TENSORS, META, MANIFEST = "tensors.safetensors", "meta.json", "MANIFEST.json"


@dataclass(kw_only=True)
class Checkpoint:
    step: int  # optimizer steps (update windows) completed
    cursor: int  # the next micro-batch this stage processes
    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    nbytes: int = 0


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointStore:
    def __init__(self, run_dir: RunDir, *, stage: int, keep: int = 3,
                 log: Callable[[str], None] | None = None) -> None:
        self.dir = run_dir.stage_checkpoints(stage)
        self._run = run_dir.path
        self.keep = keep
        self.log = log or (lambda message: None)

    def _step_dir(self, step: int) -> Path:
        return self.dir / f"step{step:08d}"

    def steps_on_disk(self) -> list[int]:
        if not self.dir.exists():
            return []
        return sorted(int(p.name[4:]) for p in self.dir.iterdir() if p.is_dir() and p.name.startswith("step"))

    def save(self, ckpt: Checkpoint, *, before_manifest: Callable[[], None] | None = None) -> Path:
        """Write and commit. `before_manifest` is the failure-injection hook for `mid-ckpt`."""
        d = self._step_dir(ckpt.step)
        if d.exists():
            shutil.rmtree(d)  # an uncommitted leftover of a crashed attempt at the same step
        d.mkdir(parents=True)
        save_file({k: v.detach().contiguous().cpu() for k, v in ckpt.tensors.items()}, str(d / TENSORS))
        (d / META).write_text(json.dumps({"step": ckpt.step, "cursor": ckpt.cursor, **ckpt.meta}))
        for name in (TENSORS, META):
            _fsync_file(d / name)
        if before_manifest is not None:
            before_manifest()
        manifest = {"step": ckpt.step, "files": {name: file_sha256(d / name) for name in (TENSORS, META)}}
        tmp = d / f".{MANIFEST}.tmp"
        with open(tmp, "w") as f:
            json.dump(manifest, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, d / MANIFEST)
        _fsync_dir(d)
        _fsync_dir(self.dir)
        self._prune()
        return d

    def verify(self, step: int) -> str | None:
        """None if the checkpoint at `step` is intact, else why not."""
        d = self._step_dir(step)
        try:
            manifest = json.loads((d / MANIFEST).read_text())
        except FileNotFoundError:
            return "no manifest (never committed)"
        except (OSError, ValueError) as err:
            return f"unreadable manifest ({err})"
        for name, digest in manifest.get("files", {}).items():
            if not (d / name).exists():
                return f"{name} is missing"
            if file_sha256(d / name) != digest:
                return f"{name} does not match its SHA-256 (truncated or corrupted)"
        return None

    def verified_steps(self) -> tuple[int, ...]:
        """Every step with an intact, committed checkpoint, oldest first."""
        return tuple(step for step in self.steps_on_disk() if self.verify(step) is None)

    def load_latest(self, *, at_most: int | None = None) -> Checkpoint | None:
        """The newest verified checkpoint (with step <= at_most), or None if there is none."""
        for step in reversed(self.steps_on_disk()):
            if at_most is not None and step > at_most:
                continue
            problem = self.verify(step)
            if problem is not None:
                shown = shown_path(self._step_dir(step), within=(self._run,))  # checkpoints/stageS/stepN
                self.log(f"checkpoint {shown} rejected: {problem}; trying an older one")
                continue
            d = self._step_dir(step)
            meta = json.loads((d / META).read_text())
            tensors = load_file(str(d / TENSORS))
            nbytes = sum((d / n).stat().st_size for n in (TENSORS, META))
            return Checkpoint(step=meta.pop("step"), cursor=meta.pop("cursor"), tensors=tensors, meta=meta,
                              path=d, nbytes=nbytes)
        return None

    def _prune(self) -> None:
        """Keep the newest `keep` committed checkpoints; drop older ones and stale partials."""
        steps = self.steps_on_disk()
        committed = [s for s in steps if (self._step_dir(s) / MANIFEST).exists()]
        keep = set(committed[-self.keep:])
        newest = committed[-1] if committed else -1
        for s in steps:
            if s not in keep and (s in committed or s < newest):
                shutil.rmtree(self._step_dir(s), ignore_errors=True)


def newest_common_step(run_dir: RunDir, *, stages: int) -> int | None:
    """The newest step every stage has a verified checkpoint of, or None when they share none."""
    common = set.intersection(*(set(CheckpointStore(run_dir, stage=s).verified_steps()) for s in range(stages)))
    return max(common, default=None)


# ---- what goes into a stage checkpoint -------------------------------------------------------
def capture(*, params: dict[str, torch.Tensor], optimizer: torch.optim.Optimizer, step: int, cursor: int,
            extra_meta: dict[str, Any] | None = None, extra_tensors: dict[str, torch.Tensor] | None = None
            ) -> Checkpoint:
    """`extra_tensors`: more state of the stage under names of their own (the tracked versions a `track:P`
    run's last chunk keeps, method/tracking.py); they come back in `Checkpoint.tensors`."""
    tensors = {f"param/{n}": p.detach().clone() for n, p in params.items()}
    tensors |= {n: t.detach().clone() for n, t in (extra_tensors or {}).items()}
    sd = optimizer.state_dict()
    for idx, state in sd["state"].items():
        for key, value in state.items():
            tensors[f"opt/{idx}/{key}"] = value.detach().clone() if torch.is_tensor(value) else torch.tensor(value)
    tensors["rng/torch"] = torch.get_rng_state()
    meta = {"param_groups": sd["param_groups"], **(extra_meta or {})}
    return Checkpoint(step=step, cursor=cursor, tensors=tensors, meta=meta)


def restore(ckpt: Checkpoint, *, params: dict[str, torch.Tensor], optimizer: torch.optim.Optimizer) -> None:
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(ckpt.tensors[f"param/{n}"])
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in ckpt.tensors.items():
        if key.startswith("opt/"):
            _, idx, name = key.split("/", 2)
            state.setdefault(int(idx), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": ckpt.meta["param_groups"]})
    torch.set_rng_state(ckpt.tensors["rng/torch"])
