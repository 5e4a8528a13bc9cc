"""The runs root: the one folder whose runs a dashboard (or a CLI command given a run id) may act on.

Runs are *named*, not pathed: a run id is a run directory's path relative to the root ("20261202-
101500-zerolock-K2", or "group/run" one level deeper). `resolve` turns an id into its `RunDir` only
when it names a run directory inside the root — after every symlink is followed — and refuses
anything else in one line without touching it: `..` anywhere, an absolute path, an empty or control-
character name, a symlink that leads out, a folder that holds no run.

An export of a run (`zerolock export`: a PEFT adapter, a merged model) is not a run wherever it lies, beside
the runs or inside one: a merged model's config.json would otherwise pass for a run's (`is_export`).
"""
from __future__ import annotations

from pathlib import Path, PurePosixPath

from .run_dir import RunDir
from .run_name import fresh_run_path

MAX_ID_CHARS = 255
DEFAULT_RUNS = "runs"  # the runs folder when none is named: `zerolock train` without --out, the dashboard
EXPORT_RECORD = "zerolock_export.json"  # what every export writes beside the model's files (peft_export.py)
_ADAPTER_CONFIG = "adapter_config.json"  # PEFT's: an adapter exported by hand, or by an older ZeroLock
NOT_A_RUN_BUT_AN_EXPORT = "is an export of a run, not a run: name the run it came from"


class NotARun(ValueError):
    """A name that does not resolve to a run directory inside the runs root; the message says why."""


def is_export(path: Path) -> bool:
    """A folder `zerolock export` (or PEFT's save_pretrained) wrote: a model, never a run's record."""
    return ((path / EXPORT_RECORD).exists() or (path / _ADAPTER_CONFIG).exists()) and \
        not RunDir(path).metrics.exists()


class RunsRoot:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()

    def __repr__(self) -> str:
        return f"RunsRoot({str(self.path)!r})"

    def resolve(self, run_id: object) -> RunDir:
        """The run `run_id` names, or `NotARun` saying why not."""
        if not isinstance(run_id, str) or not run_id.strip():
            raise NotARun("choose a run first")
        shown = repr(run_id[:80])
        if len(run_id) > MAX_ID_CHARS or any(ord(c) < 32 or c == "\x7f" for c in run_id) or "\\" in run_id:
            raise NotARun(f"{shown} is not a run name")
        parts = PurePosixPath(run_id).parts
        if PurePosixPath(run_id).is_absolute() or run_id.startswith("~") or any(p in ("..", ".") for p in parts):
            raise NotARun(f"{shown} is not a run under the runs folder: name a run by its id, as the Runs tab "
                          f"lists it")
        path = (self.path / run_id).resolve()
        if path == self.path or not path.is_relative_to(self.path):
            raise NotARun(f"{shown} leads outside the runs folder")
        rd = RunDir(path)
        if path.is_dir() and is_export(path):
            raise NotARun(f"{shown} {NOT_A_RUN_BUT_AN_EXPORT}")
        if not path.is_dir() or not rd.holds_a_run():
            raise NotARun(f"no run named {shown} under the runs folder")
        return rd

    def run_id(self, rd: RunDir) -> str:
        """The id of a run directory inside the root."""
        return rd.path.resolve().relative_to(self.path).as_posix()

    def contains(self, rd: RunDir) -> bool:
        return rd.path.resolve().is_relative_to(self.path) and rd.path.resolve() != self.path

    def runs(self) -> list[RunDir]:
        """Run directories directly under the root (and one level deeper, for grouped runs), newest first.
        Symlinks that lead outside the root are not listed, nor exports (`is_export`)."""
        if not self.path.is_dir():
            return []
        found = []
        for p in self.path.iterdir():
            rd = RunDir(p)
            if p.is_dir() and self.contains(rd) and not is_export(p):
                if rd.holds_a_run():
                    found.append(rd)
                else:
                    found += [RunDir(q) for q in p.iterdir() if q.is_dir() and self.contains(RunDir(q))
                              and RunDir(q).holds_a_run() and not is_export(q)]
        found.sort(key=lambda rd: rd.path.stat().st_mtime, reverse=True)
        return found

    def new_run(self, method: str, stages: int) -> RunDir:
        """A fresh run directory's path (not created), named as every run is (run_name.py)."""
        return RunDir(fresh_run_path(self.path, method, stages))
