"""A finished run's final weights evaluated again (`zerolock eval RUN`): on its own eval split, the record
equals the final eval metrics.json holds, whatever the runtime; on another dataset or eval size, the
same scoring on that split.

The run's chunks are rebuilt as the run built them (its saved config) and its final/ weights loaded, as
the pipeline's final eval does (runtime/final_eval.py); nothing is written into the run.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..config.run_config import RunConfig
from .trained_model import check_trained_run


def eval_config(cfg: RunConfig, *, dataset: str | None = None, eval_size: int | None = None) -> RunConfig:
    """The run's config with another eval set: `dataset` (its own fields, as the run read its file) and
    `eval_size` where given; validated like any run's. It names no directory: nothing is written."""
    data = dataclasses.replace(cfg.data, **({"dataset": dataset} if dataset else {}),
                               **({"eval_size": eval_size} if eval_size is not None else {}))
    return dataclasses.replace(cfg, data=data, out=None)  # no out: the data is encoded without a cache in the run


def evaluate_trained_run(run: str | Path, *, dataset: str | None = None,
                         eval_size: int | None = None) -> dict[str, Any]:
    """The eval record (rundir.metrics.eval_record) of `run`'s final weights; a ValueError (ConfigError)
    in one line when the run has no final weights or the eval set is refused."""
    from ..rundir.artifacts import load_trained_weights
    from ..rundir.metrics import eval_record
    from ..train.evaluation import evaluate_chunks
    from ..train.generation_eval import final_generation
    from ..train.preflight import preflight
    from ..train.run_setup import build_run_setup
    from ..train.threads import pin_threads

    rd, saved = check_trained_run(run)
    cfg = eval_config(saved, dataset=dataset, eval_size=eval_size)
    preflight(cfg)  # the dataset and its fields, before the model is built
    pin_threads(cfg.train.threads)  # the run's thread count: the same sums in the same order
    setup = build_run_setup(cfg)
    load_trained_weights(setup.chunks, rd.path)
    per_chunk = evaluate_chunks(setup.chunks, setup.eval, setup.label_first_tokens, limit=cfg.data.eval_size)
    return eval_record(per_chunk, final_generation(setup))
