"""Your own data in the dashboard: files uploaded through the Run form, kept in the runs folder's `data/`
and chosen by name. A request never names a path: a choice is a built-in dataset or the name of a file in
that folder, resolved here (no separator, no `..`, no symlink out)."""
from __future__ import annotations

import filecmp
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from zerolock_core.data.registry import BUILT_IN
from zerolock_core.rundir.process_alive import process_alive

DATA_FOLDER = "data"  # under the runs root: it holds no run, so the Runs tab never lists it
UPLOAD_LIMIT_BYTES = 20 * 2**20
UPLOAD_KINDS = {".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}  # suffix -> data/sources.py kind
BUILT_IN_CHOICES = tuple(name for name in BUILT_IN if name != "ag_news")  # ag_news would download
STAGING_PREFIX = ".upload-"  # a file being checked, in a hidden folder of its own: .upload-PID-XXXXXXXX
SAME_NAME_LIMIT = 1000  # data.csv, data-2.csv, ... data-1000.csv
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


def save_upload(root: Path, uploaded: str | Path, *, check: Callable[[str], None],
                limit: int = UPLOAD_LIMIT_BYTES) -> str:
    """Keep a file the browser uploaded (Gradio's own temporary copy) in the data folder; its name there.
    `check(spec)` is the engine's validation of the file as a run would read it (its `KIND:PATH` spec): the
    copy is checked in a hidden staging folder and appears in the folder only once it passes. A name
    already taken gets a number (`data-2.csv`), never replaces a file; the same bytes again keep their name.
    Refused (ValueError, nothing kept): another kind of file, an empty or too large one, one `check` refuses."""
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
    name = safe_name(source.name)
    folder = data_folder(root)
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=folder))  # hidden: never listed
    try:
        staged = staging / name
        shutil.copyfile(source, staged)
        try:
            check(f"{UPLOAD_KINDS[suffix]}:{staged}")
        except ValueError as err:  # the reader names the staged copy: the user knows it by its name
            raise ValueError(str(err).replace(str(staged), name)) from None
        return _claim_name(staged, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def sweep_staging(root: Path) -> list[str]:
    """Remove the staging folders of dashboards that are gone (killed mid-upload: a `finally` never ran);
    an upload another running dashboard is checking stays. The names of what was removed."""
    folder = data_folder(root)
    if not folder.is_dir():
        return []
    removed = []
    for left in folder.iterdir():
        if not left.name.startswith(STAGING_PREFIX) or left.is_symlink() or not left.is_dir():
            continue
        owner = left.name[len(STAGING_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and process_alive(int(owner)):
            continue
        shutil.rmtree(left, ignore_errors=True)
        removed.append(left.name)
    return sorted(removed)


def safe_name(name: str) -> str:
    """A file's name in the data folder: letters, digits, `._-` (anything else a `-`), at most 80 before
    the suffix; `data` when nothing is left (`....csv`, `тест.csv`)."""
    path = Path(name)
    stem = _SAFE.sub("-", path.stem).strip(".-") or "data"
    return f"{stem[:80]}{path.suffix.lower()}"


def _claim_name(staged: Path, folder: Path) -> str:
    """Link `staged` into `folder` under its name, or the first free numbered one: a hard link never
    replaces what is there (two uploads at once cannot take the same name). Bytes equal to a file already
    under one of those names: that file's name."""
    stem, suffix = staged.stem, staged.suffix
    for n in range(1, SAME_NAME_LIMIT + 1):
        name = staged.name if n == 1 else f"{stem}-{n}{suffix}"
        target = folder / name
        try:
            os.link(staged, target)
            return name
        except FileExistsError:
            if target.is_file() and not target.is_symlink() and filecmp.cmp(staged, target, shallow=False):
                return name
    raise ValueError(f"{SAME_NAME_LIMIT} files named like {staged.name} are uploaded already: delete some first")


def delete_upload(root: Path, choice: str) -> str:
    """Delete an uploaded file chosen by name (as listed: never a built-in dataset, never a path); its name."""
    if choice in BUILT_IN_CHOICES:
        raise ValueError(f"{choice} is built in: only your uploaded files can be deleted")
    if choice not in uploaded_files(root):  # by name, listed: no separator, no `..`, no symlink
        raise ValueError(f"{str(choice)[:80]!r} is not an uploaded file")
    (data_folder(root) / choice).unlink(missing_ok=True)
    return choice


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
