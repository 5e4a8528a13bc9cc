"""`zerolock train --runtime pipeline`: run a pipeline to the end with a progress bar."""
from __future__ import annotations

import time
from typing import Any

from ..config import RunConfig
from .run import Run


class PipelineFailed(RuntimeError):
    """A stage process failed; the message is the first line of its error."""


def train_pipeline(cfg: RunConfig, *, progress: bool = True) -> dict[str, Any]:
    from tqdm import tqdm

    run = Run(cfg).start()
    bar = tqdm(total=cfg.train.steps, disable=not progress, unit="step",
               desc=f"{cfg.train.method} pipeline K={cfg.train.stages}", dynamic_ncols=True)
    try:
        while not run.done:
            st = run.status()
            bar.n = st["steps_done"]
            bar.set_postfix_str(st["state"])
            bar.refresh()
            time.sleep(0.2)
    except KeyboardInterrupt:
        bar.write("stopping: asking every stage to finish its current action ...")
        run.stop()
    run.wait()
    bar.n = run.metrics["steps_done"] if run.metrics else bar.n
    bar.close()
    if run.metrics is None:
        raise RuntimeError("the run ended without metrics")
    if run.metrics["state"] == "failed":
        first = next(iter(run.metrics["errors"].values()), "unknown error")
        raise PipelineFailed(f"pipeline run failed: {first.splitlines()[0]} (details: {cfg.out}/metrics.json)")
    return run.metrics
