"""A pipeline run's final evaluation, in its own child process: the saved final weights scored on the
eval split (eval.json), its progress in the run directory for the dashboard."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..artifacts import load_trained_weights, write_json_atomic
from ..config import RunConfig
from ..evaluation import evaluate_chunks
from ..run_report import eval_block
from ..run_setup import build_run_setup
from ..threads import pin_threads
from .run_dir import EVAL_PROGRESS


def evaluate_run(cfg_dict: dict[str, Any], run_dir: str) -> None:
    cfg = RunConfig.from_dict(cfg_dict)
    pin_threads(cfg.train.threads)  # after the stages have exited: it computes alone
    progress_path = Path(run_dir) / EVAL_PROGRESS
    write_json_atomic(progress_path, {"phase": "loading", "scored": 0, "total": None})
    setup = build_run_setup(cfg)
    load_trained_weights(setup.chunks, run_dir)

    def progress(scored: int, total: int) -> None:
        write_json_atomic(progress_path, {"phase": "scoring", "scored": scored, "total": total})

    per_chunk = evaluate_chunks(setup.chunks, setup.eval, setup.label_first_tokens, limit=cfg.data.eval_size,
                                progress=progress)
    write_json_atomic(Path(run_dir) / "eval.json", eval_block(per_chunk))
