"""A run directory: what makes one, what is in it, and when it may be reused.

Nothing of an existing directory is deleted before the run's config is valid and its model can be
found, and a previous run's checkpoints are deleted only when asked (`--overwrite`). `--resume`
keeps everything and refuses a directory of another config or a finished run.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ..config import ConfigError, RunConfig
from ..telemetry.lifecycle import LIFECYCLE_FILE

EVAL_PROGRESS = "eval_progress.json"  # the final eval's {"phase": loading | scoring, "scored", "total"}

CONFIG = "config.json"
METRICS = "metrics.json"
CHECKPOINT_LOG = "checkpoint_log.jsonl"  # why the checkpoint loader skipped a checkpoint, one JSON line each
# What a previous run leaves: its presence means "this directory holds a run".
RUN_FILES = (CONFIG, METRICS, "events.jsonl", LIFECYCLE_FILE, "trace.json", "eval.json", EVAL_PROGRESS,
             CHECKPOINT_LOG)
RUN_DIRS = ("checkpoints", "stages", "final", "injected")


def holds_a_run(d: Path) -> bool:
    return any((d / n).exists() for n in RUN_FILES + RUN_DIRS)


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
    from ..loading import resolve_model

    resolve_model(cfg.model.model)


def prepare_fresh(d: Path, cfg: RunConfig, *, overwrite: bool) -> None:
    """Make `d` ready for a new run. Refuses a directory holding a previous run unless `overwrite`."""
    _check_is_directory(d)
    check_model_found(cfg)
    if d.exists() and holds_a_run(d):
        if not overwrite:
            raise ConfigError(f"--out {d} already holds a run ({', '.join(sorted(_found(d)))}); "
                              f"continue it with `zerolock train --resume {d}`, or pass --overwrite to "
                              f"delete it and start again")
        for name in RUN_FILES:
            (d / name).unlink(missing_ok=True)
        for name in RUN_DIRS:  # a replacement must never restore an earlier run's state
            shutil.rmtree(d / name, ignore_errors=True)
    d.mkdir(parents=True, exist_ok=True)


def _found(d: Path) -> list[str]:
    return [n for n in RUN_FILES + RUN_DIRS if (d / n).exists()]


def saved_config(d: Path) -> RunConfig:
    path = Path(d) / CONFIG
    if not path.exists():
        raise ConfigError(f"--resume {d}: no run to resume there (no {CONFIG})")
    try:
        return RunConfig.from_dict(json.loads(path.read_text()))
    except (ValueError, TypeError) as err:
        raise ConfigError(f"--resume {d}: its {CONFIG} is not a valid run config ({err})") from None


def check_resumable(d: Path, cfg: RunConfig) -> None:
    """Refuses to resume a directory of a different config, or a finished run."""
    _check_is_directory(d)
    saved = {k: v for k, v in saved_config(d).to_dict().items() if k != "out"}
    given = {k: v for k, v in cfg.to_dict().items() if k != "out"}
    if saved != given:
        diff = config_differences(saved, given)
        raise ConfigError(f"--resume {d}: the run there has a different config ({'; '.join(diff[:6])}); "
                          f"resume it with its own config (just `zerolock train --resume {d}`)")
    metrics = _read(d / METRICS)
    if metrics is not None and metrics.get("state") == "finished":
        raise ConfigError(f"--resume {d}: that run finished ({metrics.get('steps_done')} steps); nothing to resume")
    if cfg.train.ckpt_every <= 0:
        raise ConfigError(f"--resume {d}: the run has no checkpoints (it was started without --ckpt-every)")
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


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
