"""`zerolock train --runtime pipeline`: run a pipeline to the end with a progress bar."""
from __future__ import annotations

import time
from typing import Any

from ..config import RunConfig
from .run import Run


class PipelineFailed(RuntimeError):
    """The run ended failed; the message is its reason (one line)."""


def train_pipeline(cfg: RunConfig, *, progress: bool = True, overwrite: bool = False,
                   resume: bool = False) -> dict[str, Any]:
    """Run to the end. Returns metrics.json's content (state finished or stopped); raises
    PipelineFailed for a failed run. Ctrl-C stops the run (every stage saves and exits)."""
    from tqdm import tqdm

    run = Run(cfg, overwrite=overwrite, resume=resume).start()
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
        run.stop(wait=False)
        while not run.done:  # a second Ctrl-C is taken as the same request
            try:
                run.wait(0.5)
            except KeyboardInterrupt:
                pass
    run.wait()
    bar.n = run.metrics["steps_done"] if run.metrics else bar.n
    bar.close()
    if run.metrics is None:
        raise PipelineFailed("the run ended without metrics")
    if run.metrics["state"] == "failed":
        raise PipelineFailed(f"pipeline run failed: {run.metrics.get('reason') or 'unknown error'} "
                             f"(details: {cfg.out}/metrics.json)")
    return run.metrics
