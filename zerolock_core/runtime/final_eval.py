"""The final evaluation of a pipeline run, in a process of its own (not the coordinator's), reporting
its progress as it goes: first the `--eval-every` snapshots the stages saved while they trained (the
stages never pause to evaluate), then the final weights.

A snapshot's record is written to eval_history.json as soon as it is scored, so an eval cut short by a
stop goes on from there on `--resume`: a snapshot's weights never change once every stage passed its step.
"""
from __future__ import annotations

from typing import Any

from ..rundir.artifacts import load_trained_weights
from ..config.run_config import RunConfig
from ..train.evaluation import evaluate_chunks
from ..train.generation_eval import final_generation
from ..rundir.atomic_files import read_json, write_json_atomic
from ..rundir.eval_progress import FINAL_WEIGHTS, snapshot_words
from ..rundir.metrics import eval_record
from ..rundir.run_dir import RunDir
from ..train.run_setup import build_run_setup
from ..train.threads import pin_threads


def snapshots_to_score(cfg: RunConfig, rd: RunDir) -> list[int]:
    """The snapshot steps whose eval is not on record yet."""
    done = {h["step"] for h in read_json(rd.eval_history) or []}
    return [s for s in rd.snapshot_steps(cfg.train.stages) if s < cfg.train.steps and s not in done]


def evaluate_run(cfg_dict: dict[str, Any], run_dir: str) -> None:
    cfg, rd = RunConfig.from_dict(cfg_dict), RunDir(run_dir)
    pin_threads(cfg.train.threads)  # after the stages have exited: it computes alone
    write_json_atomic(rd.eval_progress, {"phase": "loading", "scored": 0, "total": None})
    setup = build_run_setup(cfg)
    pending = snapshots_to_score(cfg, rd)
    history = read_json(rd.eval_history) or []

    def score(what: str) -> list[dict[str, Any]]:
        def progress(scored: int, total: int) -> None:
            write_json_atomic(rd.eval_progress, {"phase": "scoring", "scored": scored, "total": total, "what": what})
        return evaluate_chunks(setup.chunks, setup.eval, setup.label_first_tokens, limit=cfg.data.eval_size,
                               progress=progress)

    for i, step in enumerate(pending):
        load_trained_weights(setup.chunks, rd.path, snapshot=step)
        record = eval_record(score(snapshot_words(step, number=i + 1, evals=len(pending) + 1)))
        history = sorted([*history, {"step": step, **record}], key=lambda h: h["step"])
        write_json_atomic(rd.eval_history, history)
    load_trained_weights(setup.chunks, rd.path)
    write_json_atomic(rd.eval, eval_record(score(FINAL_WEIGHTS), final_generation(setup)))
