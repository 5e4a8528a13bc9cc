"""A user's data file named by `--dataset KIND:PATH`, read with the `datasets` library from local files
only (never the hub): CSV with a header row, JSON Lines, Parquet, or a directory saved with
`Dataset.save_to_disk` / `DatasetDict.save_to_disk`.

Every failure is a `ValueError` of one line naming the file (and the line or row, where the reader says).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# spec prefix -> the `datasets` builder that reads it
FILE_BUILDERS = {"csv": "csv", "jsonl": "json", "parquet": "parquet"}
SAVED = "disk"  # a directory written by save_to_disk
SOURCE_KINDS = (*FILE_BUILDERS, SAVED)
SOURCE_SPECS = tuple(f"{kind}:PATH" for kind in SOURCE_KINDS)
EVAL_SPLITS = ("test", "validation")  # a saved DatasetDict's eval split, the first one present


@dataclass(kw_only=True, frozen=True)
class Source:
    kind: str  # one of SOURCE_KINDS
    path: Path

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.path}"


@dataclass(kw_only=True, frozen=True)
class Table:
    """The rows of a source: its train rows and, for a saved DatasetDict with an eval split, those."""

    columns: tuple[str, ...]
    train: list[dict[str, Any]]
    eval: list[dict[str, Any]] | None
    class_names: tuple[str, ...]  # of a ClassLabel column (Parquet, saved datasets), by column: see `read`
    class_column: str


def parse_source(spec: str) -> Source | None:
    """`KIND:PATH` -> Source; None when `spec` names no file kind (a built-in dataset, a typo)."""
    kind, sep, path = spec.partition(":")
    if not sep or kind not in SOURCE_KINDS:
        return None
    if not path.strip():
        raise ValueError(f"{spec!r} names no file: give {kind}:PATH")
    return Source(kind=kind, path=Path(path.strip()).expanduser())


def read(source: Source) -> Table:
    """All rows of `source`, through `datasets`; a ValueError of one line when it cannot be read."""
    path = source.path
    if source.kind == SAVED:
        if not path.is_dir():
            raise ValueError(f"{path}: no such directory (disk:PATH is a folder written by save_to_disk)")
    elif not path.is_file():
        raise ValueError(f"{path}: no such file")
    import datasets

    datasets.disable_progress_bars()
    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # its readers log the failure we say in one line
    try:
        if source.kind == SAVED:
            loaded = datasets.load_from_disk(str(path))
        else:
            loaded = datasets.load_dataset(FILE_BUILDERS[source.kind], data_files=str(path), split="train")
    except Exception as err:  # the readers raise their own types (ArrowInvalid, ParserError, ...)
        raise ValueError(f"{path}: {_reader_words(source, err)}") from None
    finally:
        datasets.logging.set_verbosity(verbosity)
    if isinstance(loaded, datasets.DatasetDict):
        if "train" not in loaded:
            raise ValueError(f"{path}: the saved dataset has no 'train' split (it has {', '.join(loaded)})")
        eval_name = next((s for s in EVAL_SPLITS if s in loaded), None)
        train, evals = loaded["train"], loaded[eval_name] if eval_name else None
    else:
        train, evals = loaded, None
    if len(train) == 0:
        raise ValueError(f"{path}: the file holds no rows")
    class_column, names = next(((name, tuple(f.names)) for name, f in train.features.items()
                                if isinstance(f, datasets.ClassLabel)), ("", ()))
    return Table(columns=tuple(train.column_names), train=train.to_list(),
                 eval=None if evals is None else evals.to_list(), class_names=names, class_column=class_column)


def _reader_words(source: Source, err: Exception) -> str:
    """The reader's own reason, in one line; a JSON row number as the file's line number."""
    cause = err.__cause__ or err
    text = " ".join(str(cause).split()) or type(cause).__name__
    if isinstance(err, StopIteration) or "No columns to parse" in text or "corresponds to no data" in text:
        return "the file holds no rows"
    if source.kind == "jsonl":
        text = re.sub(r"in row (\d+)", lambda m: f"on line {int(m.group(1)) + 1}", text)
        return f"not valid JSON Lines ({text})"
    return f"cannot be read as {source.kind.upper()} ({text})"
