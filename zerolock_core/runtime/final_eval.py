"""The final evaluation of a pipeline run: its saved final weights scored on the eval split, in a
process of its own (not the coordinator's), reporting its progress as it goes."""
from __future__ import annotations

from typing import Any

from ..rundir.artifacts import load_trained_weights
from ..config.run_config import RunConfig
from ..train.evaluation import evaluate_chunks
from ..train.generation_eval import final_generation
from ..rundir.atomic_files import write_json_atomic
from ..rundir.metrics import eval_record
from ..rundir.run_dir import RunDir
from ..train.run_setup import build_run_setup
from ..train.threads import pin_threads


def evaluate_run(cfg_dict: dict[str, Any], run_dir: str) -> None:
    cfg, rd = RunConfig.from_dict(cfg_dict), RunDir(run_dir)
    pin_threads(cfg.train.threads)  # after the stages have exited: it computes alone
    write_json_atomic(rd.eval_progress, {"phase": "loading", "scored": 0, "total": None})
    setup = build_run_setup(cfg)
    load_trained_weights(setup.chunks, rd.path)

    def progress(scored: int, total: int) -> None:
        write_json_atomic(rd.eval_progress, {"phase": "scoring", "scored": scored, "total": total})

    per_chunk = evaluate_chunks(setup.chunks, setup.eval, setup.label_first_tokens, limit=cfg.data.eval_size,
                                progress=progress)
    write_json_atomic(rd.eval, eval_record(per_chunk, final_generation(setup)))
