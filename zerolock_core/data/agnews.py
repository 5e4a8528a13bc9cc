"""The real AG News topic classification data (from CSV files or the HF hub).

CSV files as distributed (train.csv, test.csv): no header, three quoted
columns: class index 1-4 (World, Sports, Business, Sci/Tech), title,
description.  Text is ``title + ". " + description``; AG News writes "\\" for
line breaks inside descriptions, which we turn into spaces.
"""

from __future__ import annotations

import csv
import importlib
from pathlib import Path

from .examples import Example, TaskData
from .topics import TOPIC_CUE, TOPIC_LABEL_WORDS

_HELD_OUT_FRACTION = 10  # without a test.csv, the last 1/10 of the rows is the eval split


def _clean(s: str) -> str:
    return " ".join(s.replace("\\", " ").split())


def read_agnews_csv(path: str | Path, *, limit: int | None = None) -> list[Example]:
    """Examples from one AG News CSV file (at most ``limit`` rows)."""
    path = Path(path)
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    if not path.is_file():
        raise ValueError(f"AG News CSV not found: {path}")
    examples: list[Example] = []
    # errors="replace": a stray bad byte in a 120k-row file should not stop a run.
    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.reader(f)
        rows = iter(reader)
        while limit is None or len(examples) < limit:
            try:
                row = next(rows)
            except StopIteration:
                break
            except csv.Error as err:  # e.g. a field over the csv module's 128 KiB limit
                raise ValueError(f"{path} line {reader.line_num}: {err}") from None
            line = reader.line_num  # last physical line of the row (quoted fields may span lines)
            if len(row) != 3:
                raise ValueError(
                    f"{path} line {line}: expected 3 columns (class index, title, description), got {len(row)}"
                )
            index, title, description = row
            if index.strip() not in ("1", "2", "3", "4"):
                raise ValueError(f"{path} line {line}: class index {index!r} is not one of 1, 2, 3, 4")
            examples.append(Example(text=f"{_clean(title)}. {_clean(description)}", label=int(index) - 1))
    if not examples and limit != 0:
        raise ValueError(f"{path}: AG News CSV is empty (no rows)")
    return examples


def load_agnews_csv(spec: str) -> TaskData:
    """AG News from a train CSV file (eval: sibling test.csv or the last 10 %) or a directory."""
    path = Path(spec)
    if path.is_dir():
        train_path, test_path = path / "train.csv", path / "test.csv"
        for p in (train_path, test_path):
            if not p.is_file():
                raise ValueError(f"AG News directory {path} has no {p.name} (expected train.csv and test.csv)")
        train, evals = read_agnews_csv(train_path), read_agnews_csv(test_path)
        source = f"{train_path} + {test_path}"
    else:
        train_path, test_path = path, path.with_name("test.csv")
        train = read_agnews_csv(train_path)
        if test_path.is_file() and test_path.resolve() != train_path.resolve():
            evals = read_agnews_csv(test_path)
            source = f"{train_path} + {test_path}"
        else:
            if len(train) < 2:
                raise ValueError(f"{train_path}: need at least 2 rows to hold out an eval split, got {len(train)}")
            n_eval = max(1, len(train) // _HELD_OUT_FRACTION)
            train, evals = train[:-n_eval], train[-n_eval:]
            source = f"{train_path} (last {n_eval} rows held out for eval)"
    return TaskData(
        name="ag_news",
        label_words=TOPIC_LABEL_WORDS,
        cue=TOPIC_CUE,
        train=tuple(train),
        eval=tuple(evals),
        description=f"AG News from {source} ({len(train)} train / {len(evals)} eval)",
    )


def load_agnews_hub(*, n_train: int | None, n_eval: int | None) -> TaskData:
    """AG News through ``datasets.load_dataset("ag_news")`` (first n rows of each split)."""
    try:
        datasets = importlib.import_module("datasets")
    except ImportError:
        raise ValueError(
            "--dataset ag_news needs the 'datasets' package (pip install datasets) "
            "or use --dataset csv:PATH with the AG News CSV files"
        ) from None
    try:
        ds = datasets.load_dataset("ag_news")
        splits = {}
        for split, n in (("train", n_train), ("test", n_eval)):
            rows = ds[split] if n is None else ds[split].select(range(min(n, len(ds[split]))))
            splits[split] = tuple(Example(text=_clean(r["text"]), label=int(r["label"])) for r in rows)
    except Exception as e:  # offline, hub unreachable, cache corrupt...
        first_line = (str(e).strip().splitlines() or [""])[0]
        raise ValueError(
            f"could not load AG News from the Hugging Face hub ({type(e).__name__}: {first_line}); "
            "use --dataset csv:PATH with the AG News CSV files"
        ) from e
    return TaskData(
        name="ag_news",
        label_words=TOPIC_LABEL_WORDS,
        cue=TOPIC_CUE,
        train=splits["train"],
        eval=splits["test"],
        description=f"AG News from the Hugging Face hub ({len(splits['train'])} train / {len(splits['test'])} eval)",
    )
