"""A run directory: every path in it, how one is made, reused or resumed, and who may write it.

Nothing else in the project spells a run's file names: writers and readers ask a `RunDir` for the
path of what they want. A run directory holds

    config.toml / config.json   the run's config (the TOML reproduces it: `zerolock train --config`)
    balance.json                what `--boundaries auto` measured and chose (auto_boundaries.py)
    metrics.json                the run's record, written once at its end (`metrics.Metrics`)
    events/NNNNNN.jsonl, lifecycle.jsonl, curves.jsonl, trace.json   telemetry (`telemetry/`)
    tensorboard/                TensorBoard event files, one per session (`--tensorboard`)
    eval.json, eval_progress.json, eval_history.json          the final evaluation (and the snapshots')
    snapshots/step{N}/chunk{k}.safetensors                    a pipeline's --eval-every weights
    stages/stage{s}.json, stages/stage{s}.losses.jsonl        each stage's own report and losses
    final/chunk{k}.safetensors                                the trained weights
    checkpoints/stage{s}/step{N}/, checkpoint_log.jsonl       checkpoints and why one was skipped
    injected/, exports/, dashboard.json, stderr.log           failure markers, exports, the app's notes

Rules: nothing of an existing directory is deleted before the run's config is valid and its model
can be found; a previous run is deleted only when asked (`overwrite`); `resume` keeps everything and
refuses a directory of another config or a finished run. **One writer at a time**: every process
that writes a run holds its lock (`RunLock`, an `flock` the kernel releases when the holder dies),
so a second run, `--resume` or `--overwrite` of a live directory is refused before it touches
anything.
"""
from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config.run_config import RunConfig
from ..config.field_words import ConfigError, FieldError
from .atomic_files import read_json, read_json_lines, write_json_atomic
from .process_alive import process_alive
from .run_extension import check_extendable, extends, fewer_steps
from .shown_path import scrub
from ..telemetry.tensorboard_log import tensorboard_missing, tensorboard_on, write_run_events

if TYPE_CHECKING:
    from .metrics import Metrics

_CONFIG_JSON, _CONFIG_TOML, _METRICS = "config.json", "config.toml", "metrics.json"
_EVENTS_FILE, _LIFECYCLE, _CURVES, _TRACE = "events.jsonl", "lifecycle.jsonl", "curves.jsonl", "trace.json"
_EVAL, _EVAL_PROGRESS, _CHECKPOINT_LOG = "eval.json", "eval_progress.json", "checkpoint_log.jsonl"
_APP_RECORD, _STDERR, _ENCODED = "dashboard.json", "stderr.log", "encoded-data.pt"
_BALANCE, _EVAL_HISTORY = "balance.json", "eval_history.json"
_LOCK, _RESERVE = ".lock", ".reserve"
_CHECKPOINTS, _STAGES, _FINAL, _INJECTED, _EXPORTS = "checkpoints", "stages", "final", "injected", "exports"
_EVENTS, _TENSORBOARD, _SNAPSHOTS = "events", "tensorboard", "snapshots"
# What a previous run leaves: the presence of any of these means "this directory holds a run".
_RUN_FILES = (_CONFIG_JSON, _CONFIG_TOML, _METRICS, _EVENTS_FILE, _LIFECYCLE, _CURVES, _TRACE, _EVAL, _EVAL_PROGRESS,
              _CHECKPOINT_LOG, _APP_RECORD, _STDERR, _ENCODED, _BALANCE, _EVAL_HISTORY)
_RUN_DIRS = (_CHECKPOINTS, _STAGES, _FINAL, _INJECTED, _EXPORTS, _EVENTS, _TENSORBOARD, _SNAPSHOTS)
RESERVE_BYTES = 64 * 1024  # kept free for a failed run's metrics.json when the disk fills up
_TEMPORARY = re.compile(r"^\..+\.tmp-(\d+)$")  # write_json_atomic's and save_final_weights' temporaries


class RunInUse(ConfigError):
    """Another live process writes this run directory."""


class RunDir:
    """The paths of one run directory (nothing is created by asking for a path)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunDir) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    @property
    def name(self) -> str:
        return self.path.name

    # ---- files ---------------------------------------------------------------------------------
    @property
    def balance_json(self) -> Path:
        return self.path / _BALANCE

    @property
    def config_json(self) -> Path:
        return self.path / _CONFIG_JSON

    @property
    def config_toml(self) -> Path:
        return self.path / _CONFIG_TOML

    @property
    def metrics(self) -> Path:
        return self.path / _METRICS

    @property
    def events(self) -> Path:
        """The folder of the event files: one per `telemetry.events.SEGMENT_STEPS` steps."""
        return self.path / _EVENTS

    def event_file(self, segment: int) -> Path:
        return self.path / _EVENTS / f"{segment:06d}.jsonl"

    def event_files(self) -> list[Path]:
        """Every event file in order (a run of an earlier version: its one events.jsonl)."""
        legacy = self.path / _EVENTS_FILE
        return ([legacy] if legacy.exists() else []) + \
            (sorted(self.events.glob("*.jsonl")) if self.events.is_dir() else [])

    @property
    def lifecycle(self) -> Path:
        return self.path / _LIFECYCLE

    @property
    def curves(self) -> Path:
        """The loss curves at full detail, one JSON line per step (metrics.json keeps a summary)."""
        return self.path / _CURVES

    @property
    def trace(self) -> Path:
        return self.path / _TRACE

    @property
    def tensorboard(self) -> Path:
        """The TensorBoard event files (`--tensorboard`): `tensorboard --logdir` the runs folder."""
        return self.path / _TENSORBOARD

    @property
    def eval(self) -> Path:
        return self.path / _EVAL

    @property
    def eval_progress(self) -> Path:
        """The final eval's {"phase": loading | scoring, "scored", "total", "what"} while it runs (eval_progress.py)."""
        return self.path / _EVAL_PROGRESS

    @property
    def eval_history(self) -> Path:
        """A pipeline run's `--eval-every` evals, one `eval_record` per snapshot step, written by its final
        eval as each is scored (a stopped eval goes on from the last one)."""
        return self.path / _EVAL_HISTORY

    @property
    def checkpoint_log(self) -> Path:
        """Why the checkpoint loader skipped a checkpoint, one JSON line each."""
        return self.path / _CHECKPOINT_LOG

    @property
    def app_record(self) -> Path:
        """The dashboard's notes on a run it started: batch, method, when, how it ended."""
        return self.path / _APP_RECORD

    @property
    def stderr_log(self) -> Path:
        """The standard error of a run's child process (the reference trainer's, in the dashboard)."""
        return self.path / _STDERR

    # ---- folders -------------------------------------------------------------------------------
    @property
    def checkpoints(self) -> Path:
        return self.path / _CHECKPOINTS

    def stage_checkpoints(self, stage: int) -> Path:
        return self.path / _CHECKPOINTS / f"stage{stage}"

    @property
    def stages(self) -> Path:
        return self.path / _STAGES

    @property
    def encoded_data(self) -> Path:
        """The run's data made and encoded once (encoded_data_cache.py): a replacement stage reads it."""
        return self.path / _ENCODED

    def stage_report(self, stage: int) -> Path:
        return self.path / _STAGES / f"stage{stage}.json"

    def stage_losses(self, stage: int) -> Path:
        """The stage's training losses, one JSON line per optimizer step (append-only)."""
        return self.path / _STAGES / f"stage{stage}.losses.jsonl"

    @property
    def final(self) -> Path:
        return self.path / _FINAL

    def final_weights(self, chunk: int) -> Path:
        return self.path / _FINAL / f"chunk{chunk}.safetensors"

    def final_chunks(self) -> dict[int, Path]:
        """Every chunk's final weights file, keyed by chunk index."""
        found = sorted(self.final.glob("chunk*.safetensors")) if self.final.is_dir() else []
        return {int(p.stem.removeprefix("chunk")): p for p in found}

    def snapshot_weights(self, step: int, chunk: int) -> Path:
        """Chunk `chunk`'s trainable weights after optimizer step `step`: a pipeline stage writes one every
        `--eval-every` steps, for the final eval to score (the stages never stop to evaluate)."""
        return self.path / _SNAPSHOTS / f"step{step}" / f"chunk{chunk}.safetensors"

    def snapshot_steps(self, chunks: int) -> list[int]:
        """The steps for which every one of `chunks` chunks saved its snapshot, in order."""
        root = self.path / _SNAPSHOTS
        found = [int(d.name.removeprefix("step")) for d in root.glob("step*")
                 if d.name.removeprefix("step").isdigit()] if root.is_dir() else []
        return sorted(s for s in found if all(self.snapshot_weights(s, k).is_file() for k in range(chunks)))

    def injected_marker(self, stage: int, label: str) -> Path:
        """The file recording that failure `label` hit `stage` (it outlives the coordinator's store)."""
        return self.path / _INJECTED / f"stage{stage}-{re.sub(r'[^0-9A-Za-z@-]', '_', label)}"

    def export(self, name: str) -> Path:
        """A file under exports/ (the folder is made)."""
        folder = self.path / _EXPORTS
        folder.mkdir(parents=True, exist_ok=True)
        return folder / name

    # ---- what is there -------------------------------------------------------------------------
    def holds_a_run(self) -> bool:
        return bool(self.found())

    def found(self) -> list[str]:
        return [n for n in _RUN_FILES + _RUN_DIRS if (self.path / n).exists()]

    def is_live(self) -> bool:
        """A process holds the run's lock (it is training, resuming or evaluating it right now)."""
        return self.holder() is not None

    def holder(self) -> str | None:
        """Who holds the run's lock, in its own words (process, host, since when, command); None: nobody."""
        return RunLock.holder(self.path / _LOCK)

    def saved_config(self) -> RunConfig:
        """The config the run was made with (config.json; a run's metrics.json where that is missing), its
        `out` this directory, wherever it is now (the files name it only by its name: `public`)."""
        if self.config_json.exists():
            try:
                saved = json.loads(self.config_json.read_text())
                return RunConfig.from_dict({**saved, "out": str(self.path)})
            except (ValueError, TypeError) as err:
                raise ConfigError(f"{self.path}: its {_CONFIG_JSON} is not a valid run config ({err})") from None
        metrics = self.read_metrics()
        if metrics is not None and metrics.config:
            return RunConfig.from_dict({**metrics.config, "out": str(self.path)})
        raise ConfigError(f"{self.path}: no run there (no {_CONFIG_JSON})")

    def public(self, record: Any) -> Any:
        """`record` (JSON values) as the run's files keep it: every string with this directory's absolute path
        made relative to it (shown_path.scrub: a traceback's `/srv/runs/x/final/chunk0.safetensors` reads
        `final/chunk0.safetensors`) and a config's `out` the directory's name. What a run writes may be read
        by a dashboard's clients: it names no place on the server."""
        if isinstance(record, str):
            return scrub(record, self.path)
        if isinstance(record, list):
            return [self.public(v) for v in record]
        if isinstance(record, dict):
            out = {k: self.public(v) for k, v in record.items()}
            if isinstance(out.get("train"), dict) and "out" in out:  # a run config
                out["out"] = self.name
            return out
        return record

    def read_balance(self) -> dict[str, Any] | None:
        """What `--boundaries auto` measured and chose for this run; None for a run of named or even boundaries."""
        return read_json(self.balance_json)

    def read_metrics(self) -> "Metrics | None":
        """The run's record, or None while it has none (running, or killed before its end)."""
        from .metrics import Metrics

        data = read_json(self.metrics)
        return None if data is None else Metrics.from_json(data)

    def public_metrics(self, metrics: "Metrics") -> "Metrics":
        """`metrics` as metrics.json keeps it (`public`): what a job hands its caller equals what a reader of
        the directory gets."""
        from .metrics import Metrics

        return Metrics.from_json(self.public(metrics.to_json()))

    # ---- writing -------------------------------------------------------------------------------
    def write_config(self, cfg: RunConfig) -> None:
        """The run's config: config.json (what `--resume` reads; `out` as the directory's name) and config.toml, which
        `zerolock train --config RUN/config.toml --out NEW` runs again."""
        from ..config.config_file import write_config_toml

        write_json_atomic(self.config_json, self.public(cfg.to_dict()))
        try:
            write_config_toml(cfg, self.config_toml, comment=f"the config of run {self.name}; run it again with "
                                                            f"`zerolock train --config {self.name}/{_CONFIG_TOML} "
                                                            f"--out DIR`")
        except ModuleNotFoundError as err:  # tomli-w missing (a bare GPU machine, no internet): config.json suffices
            if err.name != "tomli_w":
                raise

    def write_metrics(self, metrics: "Metrics") -> None:
        """The one writer of metrics.json. When the disk is full, the record is written small (state,
        reason, steps) into the space the run kept free for it (`RESERVE_BYTES`); if even that fails,
        the error is raised (its message says so) and no temporary file is left behind. With
        `--tensorboard`, this session's TensorBoard events are written first (tensorboard_log.py); a
        failure to write them is noted in the record, never lost in place of it."""
        metrics = self._write_tensorboard(metrics)
        try:
            write_json_atomic(self.metrics, self.public(metrics.to_json()))
        except OSError as err:
            if err.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self.release_reserve()
            small = metrics.small(f"the disk is full: metrics.json was written without its telemetry "
                                  f"({err.strerror or err})")
            write_json_atomic(self.metrics, self.public(small.to_json()))
        self.release_reserve()
        if metrics.state == "finished" and metrics.eval is not None:
            # nothing of this run reads its encoded data again (a later `generate` or resume encodes anew
            # in seconds): megabytes per run that a runs folder would otherwise keep for ever
            self.encoded_data.unlink(missing_ok=True)

    def _write_tensorboard(self, metrics: "Metrics") -> "Metrics":
        """The record's TensorBoard events (a no-op unless the run asked for them); the record, with a
        note when they could not be written."""
        if not tensorboard_on(metrics.config):
            return metrics
        try:
            write_run_events(self.tensorboard, self.public(metrics.to_json()), read_json_lines(self.curves))
        except (ImportError, OSError) as err:
            note = f"TensorBoard events were not written: {tensorboard_missing() or err}"
            return dataclasses.replace(metrics, telemetry_note="; ".join(filter(None, (metrics.telemetry_note, note))))
        return metrics

    def keep_reserve(self) -> None:
        """Set aside a little disk space for the run's final record (see `write_metrics`)."""
        path = self.path / _RESERVE
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError:  # no room even for this, or a filesystem without fallocate: nothing reserved
            path.unlink(missing_ok=True)

    def release_reserve(self) -> None:
        (self.path / _RESERVE).unlink(missing_ok=True)

    def sweep_temporaries(self) -> list[Path]:
        """Remove the temporary files of writers that are gone (killed mid-write, or out of disk)."""
        removed = []
        snapshots = self.path / _SNAPSHOTS
        for folder in (self.path, self.stages, self.final, *(snapshots.glob("step*") if snapshots.is_dir() else ())):
            if not folder.is_dir():
                continue
            for p in folder.iterdir():
                m = _TEMPORARY.match(p.name)
                if m and not process_alive(int(m.group(1))):
                    p.unlink(missing_ok=True)
                    removed.append(p)
        return removed

    # ---- making one ready ----------------------------------------------------------------------
    def lock(self) -> "RunLock":
        """This process becomes the run's one writer, or `RunInUse` says who is."""
        _check_is_directory(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        return RunLock(self.path / _LOCK)

    def prepare_fresh(self, cfg: RunConfig, *, overwrite: bool, balance: dict[str, Any] | None = None) -> "RunLock":
        """Lock the directory and make it ready for a new run: refuses a directory holding a previous run
        unless `overwrite`. `balance`: what `--boundaries auto` measured (auto_boundaries.py), kept beside the
        config. Returns the held lock (release it when the run has ended)."""
        _check_is_directory(self.path)
        check_model_found(cfg)
        if self.holds_a_run() and not overwrite:
            if self.is_live():
                raise RunInUse(self._in_use())
            raise ConfigError(f"--out {self.path} already holds a run ({', '.join(sorted(self.found()))}); "
                              f"continue it with `zerolock train --resume {self.path}`, or pass --overwrite to "
                              f"delete it and start again")
        lock = self.lock()
        try:
            for name in _RUN_FILES:
                (self.path / name).unlink(missing_ok=True)
            for name in _RUN_DIRS:  # a replacement must never restore an earlier run's state
                shutil.rmtree(self.path / name, ignore_errors=True)
            self.sweep_temporaries()
            self.write_config(cfg)
            if balance is not None:
                write_json_atomic(self.balance_json, balance)
            self.keep_reserve()
        except BaseException:
            lock.release()
            raise
        return lock

    def prepare_resume(self, cfg: RunConfig) -> "RunLock":
        """Lock the directory of a crashed or stopped run, or of one given more steps, and check it can be
        continued with `cfg` (the config a run given more steps is saved with)."""
        _check_is_directory(self.path)
        if not self.config_json.exists():
            raise ConfigError(f"--resume {self.path}: no run to resume there (no {_CONFIG_JSON})")
        lock = self.lock()
        try:
            check_resumable(self, cfg)
            if cfg.train.steps != self.saved_config().train.steps:  # trained on to more steps: what it is now
                self.write_config(cfg)
            self.sweep_temporaries()
            self.keep_reserve()
        except BaseException:
            lock.release()
            raise
        return lock

    def _in_use(self) -> str:
        holder = RunLock.holder(self.path / _LOCK) or "another process"
        return (f"{self.path} is in use: {holder} is writing this run right now; wait for it to end or stop "
                f"it (Ctrl-C, or Stop in the dashboard), then try again")


class RunLock:
    """An exclusive `flock` on the run's lock file, held for as long as a process writes the run. The
    kernel drops it when the holder exits, however it exits: a crashed run is never left locked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = RunLock.holder(path) or "another process"
            raise RunInUse(f"{path.parent} is in use: {holder} is writing this run right now; wait for it to "
                           f"end or stop it (Ctrl-C, or Stop in the dashboard), then try again") from None
        os.ftruncate(fd, 0)
        words = f"process {os.getpid()} on {socket.gethostname()} (since {time.strftime('%H:%M:%S')}: " \
                f"{' '.join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv[:4]))})"
        os.write(fd, words.encode())
        self._fd: int | None = fd

    @staticmethod
    def holder(path: Path) -> str | None:
        """Who holds the lock at `path` (its own words), or None when nobody does."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return os.read(fd, 400).decode(errors="replace").strip() or "another process"
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _check_is_directory(d: Path) -> None:
    if d.exists() and not d.is_dir():
        raise ConfigError(f"--out {d}: exists and is not a directory")
    for parent in d.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"--out {d}: {parent} is not a directory")
            break


def check_model_found(cfg: RunConfig) -> None:
    """The cheap part of loading the model, before anything is touched (a mistyped --model)."""
    from ..models.loading import resolve_model

    resolve_model(cfg.model.model)


def check_resumable(d: RunDir, cfg: RunConfig) -> None:
    """Refuses to resume a directory of a different config, or a finished and evaluated run. `cfg` may give
    the run more steps than it was started with (run_extension.py): a run, finished or not, then goes on."""
    saved = {k: v for k, v in d.saved_config().to_dict().items() if k != "out"}
    given = {k: v for k, v in cfg.to_dict().items() if k != "out"}
    if extends(saved, given):
        check_extendable(d.path, saved_steps=saved["train"]["steps"], cfg=cfg)
        check_model_found(cfg)
        return
    if fewer_steps(saved, given):
        raise FieldError("steps", lambda w: f"{w.resume(d.path)} {w.value('steps', cfg.train.steps)}: the run "
                                            f"there trains {saved['train']['steps']} steps; a run can be "
                                            f"trained on to more steps, never cut to fewer")
    if saved != given:
        diff = config_differences(saved, given)
        raise ConfigError(f"--resume {d.path}: the run there has a different config ({'; '.join(diff[:6])}); "
                          f"resume it with its own config (just `zerolock train --resume {d.path}`)")
    metrics = d.read_metrics()
    if metrics is not None and metrics.state == "finished":
        raise FieldError("ckpt_every", lambda w: f"{w.resume(d.path)}: that run finished ({metrics.steps_done} "
                                                 "steps); nothing to resume")
    trained = metrics is not None and metrics.training_complete
    if cfg.train.ckpt_every <= 0 and not trained:
        raise FieldError("ckpt_every", lambda w: f"{w.resume(d.path)}: the run has no checkpoints (it was started "
                                                 f"with {w.value('ckpt_every', 0)})")
    check_model_found(cfg)


def config_differences(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += config_differences(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append(f"{prefix}{key}: {va!r} there, {vb!r} here")
    return out
