"""Your own data in the dashboard: files uploaded through the Run form, kept in the runs folder's `data/`
and chosen by name. A request never names a path: a choice is a built-in dataset or the name of a file in
that folder, resolved here (no separator, no `..`, no symlink out)."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from zerolock_core.data.registry import BUILT_IN

DATA_FOLDER = "data"  # under the runs root: it holds no run, so the Runs tab never lists it
UPLOAD_LIMIT_BYTES = 20 * 2**20
UPLOAD_KINDS = {".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}  # suffix -> data/sources.py kind
BUILT_IN_CHOICES = tuple(name for name in BUILT_IN if name != "ag_news")  # ag_news would download
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def data_folder(root: Path) -> Path:
    return Path(root) / DATA_FOLDER


def uploaded_files(root: Path) -> list[str]:
    """The data files uploaded so far, by name, sorted."""
    folder = data_folder(root)
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_file() and not p.is_symlink()
                  and p.suffix in UPLOAD_KINDS and not p.name.startswith("."))


def dataset_choices(root: Path) -> list[str]:
    return [*BUILT_IN_CHOICES, *uploaded_files(root)]


def save_upload(root: Path, uploaded: str | Path, *, limit: int = UPLOAD_LIMIT_BYTES) -> str:
    """Copy a file the browser uploaded (Gradio's own temporary copy) into the data folder; its name there.
    Refused (ValueError, nothing written): another kind of file, an empty or too large one."""
    source = Path(uploaded)
    suffix = source.suffix.lower()
    if suffix not in UPLOAD_KINDS:
        raise ValueError(f"{source.name}: upload a .csv (with a header row), .jsonl or .parquet file")
    size = source.stat().st_size
    if size == 0:
        raise ValueError(f"{source.name} is empty")
    if size > limit:
        raise ValueError(f"{source.name} is {size / 2**20:.1f} MiB; the dashboard takes files up to "
                         f"{limit / 2**20:.0f} MiB (train on a larger one from the command line)")
    stem = _SAFE.sub("-", source.stem).strip(".-") or "data"
    name = f"{stem[:80]}{suffix}"
    folder = data_folder(root)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.tmp-{os.getpid()}"
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, folder / name)  # a second upload of the same name replaces the first
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return name


def dataset_spec(root: Path, choice: str) -> str:
    """The engine's `--dataset` of a form choice: a built-in by name, an uploaded file as KIND:PATH."""
    if choice in BUILT_IN_CHOICES:
        return choice
    if choice not in uploaded_files(root):  # by name, listed: no separator, no `..`, no symlink
        raise ValueError(f"dataset {str(choice)[:80]!r} is neither built in ({', '.join(BUILT_IN_CHOICES)}) nor an "
                         "uploaded file: upload it first")
    path = data_folder(root) / choice
    assert path.resolve().is_relative_to(Path(root).resolve()), "listed files are plain files in the folder"
    return f"{UPLOAD_KINDS[path.suffix]}:{path}"
