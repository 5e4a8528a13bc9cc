"""A run's data, made and encoded once and kept in its directory (`RunDir.encoded_data`).

Making a stage's data costs seconds that have nothing to do with the stage: the synthetic `topics` task is
generated (1.4 s for its 11,000 headlines on this project's 2-core box) and every split is tokenised
(0.6 s) — in every stage process, and again in a replacement after a failure, where those 2 s were most of
a recovery's restart. The first stage to finish writes the encoded splits here (atomically); a stage that
finds them (a replacement, a resumed run, the final evaluation) reads them in milliseconds.

The file is keyed by everything the encoding depends on (the data section of the config, the model — its
tokenizer — and the data seed); a key that differs is a miss, and the encoding is made again. What is read
back is the encoded splits and the task's words, not its examples: `TaskData.train`/`eval` are empty there
(nothing after the encoding reads them).
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..data.encoding import EncodedSplit
from ..data.examples import TaskData

SPLIT_FIELDS = ("input_ids", "attention_mask", "labels", "label_index")
STORED_AS = {"input_ids": torch.int32, "attention_mask": torch.uint8, "labels": torch.int32, "label_index": torch.int32}
# (token ids fit int32: vocabularies are far below 2**31; a third of the bytes of int64)


@dataclass(kw_only=True, frozen=True, eq=False)
class EncodedData:
    task: TaskData
    train: EncodedSplit
    eval: EncodedSplit
    label_first_tokens: torch.Tensor


def cache_key(data: dict[str, Any], *, model: str, data_seed: int) -> str:
    text = json.dumps({"data": data, "model": model, "data_seed": data_seed}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def load(path: Path, key: str) -> EncodedData | None:
    """The cached data under `key`, or None (no file, another key, a file that does not read)."""
    try:
        saved = torch.load(path, weights_only=True)
    except (FileNotFoundError, RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError):
        return None  # nothing usable there: the caller encodes again (and writes it anew)
    if not isinstance(saved, dict) or saved.get("key") != key:
        return None
    words = saved["task"]
    task = TaskData(name=words["name"], label_words=tuple(words["label_words"]), cue=words["cue"], train=(),
                    eval=(), description=words["description"])
    return EncodedData(task=task, train=_split(saved["train"]), eval=_split(saved["eval"]),
                       label_first_tokens=saved["label_first_tokens"])


def save(path: Path, key: str, data: EncodedData) -> bool:
    """Write atomically; a stage that loses the race to write the same bytes first changes nothing. A file
    that cannot be written (a full disk, a read-only directory) is skipped with a one-line warning on
    stderr: the run goes on, and a process that finds no file encodes again. Returns whether it was
    written. The bytes are made in memory first, so that a full disk reads as itself (ENOSPC), not as
    the zip writer's "[enforce fail at inline_container.cc]"."""
    t = data.task
    payload = {"key": key, "task": {"name": t.name, "label_words": list(t.label_words), "cue": t.cue,
                                    "description": t.description},
               "train": _stored(data.train), "eval": _stored(data.eval),
               "label_first_tokens": data.label_first_tokens}
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(buffer.getbuffer())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        print(f"zerolock: warning: the encoded data was not kept ({path.name}: {err.strerror or err}); "
              f"a process that needs it encodes it again", file=sys.stderr, flush=True)
        return False
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return True


def _stored(split: EncodedSplit) -> dict[str, torch.Tensor]:
    return {f: getattr(split, f).to(STORED_AS[f]) for f in SPLIT_FIELDS}


def _split(fields: dict[str, torch.Tensor]) -> EncodedSplit:
    return EncodedSplit(**{f: fields[f].long() for f in SPLIT_FIELDS})
