"""Gradio's own copies of uploaded files (and of files it serves) live in its temporary folder,
GRADIO_TEMP_DIR. The dashboard gives it a folder of its own, under the runs root, one per dashboard
process, emptied when the dashboard starts and when it ends; and drops each upload's copy as soon as the
upload is kept or refused (data_uploads.py keeps its own copy). Without this, every upload stayed in the
system's /tmp/gradio, refused ones too, after a restart too."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from zerolock_core.rundir.process_alive import process_alive

TEMP_FOLDER = ".gradio-tmp"  # under the runs root: a dot folder, never a run


def temp_root(runs_root: Path) -> Path:
    return Path(runs_root) / TEMP_FOLDER


def own_temp_dir(runs_root: Path, *, pid: int | None = None) -> Path:
    """Point Gradio at this process's folder under the runs root (before the app is built: Gradio reads
    GRADIO_TEMP_DIR when it builds and launches it) and remove what dashboards that ended left there."""
    pid = os.getpid() if pid is None else pid
    root = temp_root(runs_root)
    if root.is_dir():
        for left in root.iterdir():
            if left.name == str(pid) or not (left.name.isdigit() and process_alive(int(left.name))):
                _remove(left)
    folder = root / str(pid)
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["GRADIO_TEMP_DIR"] = str(folder)
    return folder


def remove_temp_dir(folder: Path) -> None:
    """What the dashboard's Gradio kept, gone (the dashboard is ending); the runs root's TEMP_FOLDER too
    when no other dashboard uses it."""
    _remove(Path(folder))
    try:
        Path(folder).parent.rmdir()  # only when empty
    except OSError:
        pass


def upload_folder() -> Path:
    """Where Gradio puts uploads now (its own rule: GRADIO_TEMP_DIR, else the system's temp/gradio)."""
    from gradio.utils import get_upload_folder

    return Path(get_upload_folder()).resolve()


def discard_upload(path: str | Path) -> None:
    """Delete Gradio's copy of an upload (and its folder, one per content hash, when that is empty). Only a
    file inside Gradio's upload folder: a path from anywhere else is left alone."""
    folder = upload_folder()
    file = Path(path)
    if file.is_symlink() or not file.is_file() or not file.resolve().is_relative_to(folder):
        return
    file = file.resolve()
    file.unlink(missing_ok=True)
    parent = file.parent
    if parent != folder:
        try:
            parent.rmdir()  # only when empty: another upload of the same bytes may be in it
        except OSError:
            pass


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
