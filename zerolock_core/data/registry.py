"""``--dataset`` spec -> TaskData."""

from __future__ import annotations

import csv
import functools
import hashlib
from pathlib import Path
from typing import Any

from .agnews import load_agnews_csv, load_agnews_hub
from .examples import TaskData
from .needle import TRAIN_ROWS as NEEDLE_TRAIN_ROWS, make_needle
from .sources import SOURCE_SPECS, Source, parse_source
from .topics import TRAIN_ROWS as TOPICS_TRAIN_ROWS, make_topics
from .user_task import FieldMap, load_user_task

BUILT_IN = ("topics", "needle", "ag_news")
# the train rows of the built-in tasks drawn here (ag_news: the hub's copy says)
BUILT_IN_TRAIN_ROWS = {"topics": TOPICS_TRAIN_ROWS, "needle": NEEDLE_TRAIN_ROWS}
ACCEPTED_SPECS = (*BUILT_IN, *SOURCE_SPECS)


@functools.lru_cache(maxsize=16)
def _synthetic(name: str, seed: int) -> TaskData:
    # TaskData is frozen and holds tuples, so sharing one instance is safe.
    return make_topics(seed=seed) if name == "topics" else make_needle(seed=seed)


def load_task(spec: str, *, seed: int = 0, fields: FieldMap = FieldMap(), eval_spec: str = "") -> TaskData:
    """Load a task by spec: "topics", "needle", "ag_news" or a file (data/sources.py) read with `fields`
    (seed: synthetic only). An AG-News-shaped CSV (no header; class index 1-4, title, description) or a
    folder with its train.csv and test.csv reads as AG News when no field is named."""
    if spec in ("topics", "needle"):
        return _synthetic(spec, seed)
    if spec == "ag_news":
        return load_agnews_hub(n_train=None, n_eval=None)
    source = parse_source(spec)
    if source is None:
        raise ValueError(f"unknown dataset {spec!r}; expected one of: {', '.join(ACCEPTED_SPECS)}")
    if source.kind == "csv" and fields.is_default and not eval_spec and is_agnews_shaped(source.path):
        return load_agnews_csv(str(source.path))
    extra = eval_source(eval_spec)
    return _read_user_task(source, fields, extra, file_stamp(source.path), file_stamp(extra.path) if extra else ())


@functools.lru_cache(maxsize=2)
def _read_user_task(source: Source, fields: FieldMap, extra: Source | None, *stamps: Any) -> TaskData:
    """A user's file parsed once per process while its bytes stay the same: the preflight checks the rows the
    run then trains on (a large file was parsed twice). The stamps key the cache on the files' contents, so a
    file changed between two reads is read again; TaskData is frozen and holds tuples, so sharing it is safe."""
    return load_user_task(source, fields, eval_source=extra)


def file_stamp(path: Path) -> tuple[Any, ...]:
    """(name, digest of the bytes) of a file, or of every file under a folder (a saved dataset); () if it is
    absent (the reader says so). Hashing is a small part of parsing, and unlike a file's time it cannot miss
    a rewrite within the file system's clock tick."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.is_file() else []

    def digest(f: Path) -> str:
        with f.open("rb") as stream:
            return hashlib.file_digest(stream, "blake2b").hexdigest()

    return tuple((str(f), digest(f)) for f in files)


def load_data(data: Any, *, seed: int = 0) -> TaskData:
    """The task of a run's data section (run_fields.DataConfig): its dataset read with its fields."""
    fields = FieldMap(text_fields=data.text_fields, label_field=data.label_field, label_words=data.label_words,
                      prompt_field=data.prompt_field, response_field=data.response_field,
                      max_row_chars=data.max_row_chars, eval_fraction=data.eval_fraction,
                      skip_bad_rows=data.skip_bad_rows)
    return load_task(data.dataset, seed=seed, fields=fields, eval_spec=data.eval_dataset)


def eval_source(spec: str) -> Source | None:
    if not spec:
        return None
    source = parse_source(spec)
    if source is None:
        raise ValueError(f"the eval dataset {spec!r} is not a file: expected one of {', '.join(SOURCE_SPECS)}")
    return source


def is_agnews_shaped(path: Path) -> bool:
    """A folder (train.csv + test.csv), or a CSV of three columns whose first cell is a number: AG News has
    no header row (its reader checks that every class index is 1-4); any other CSV starts with its fields'
    names."""
    if path.is_dir():
        return True
    if not path.is_file():
        return False  # the reader says so
    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        try:
            first = next(csv.reader(f), [])
        except csv.Error:
            return False  # the generic reader says what is wrong
    return len(first) == 3 and first[0].strip().isdigit()
