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
    # tqdm's own rate would count start-up and outages as training: the postfix says it instead
    bar = tqdm(total=cfg.train.steps, disable=not progress, unit="step",
               desc=f"{cfg.train.method} pipeline K={cfg.train.stages}", dynamic_ncols=True,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{postfix}")
    try:
        while not run.done:
            st = run.status()
            bar.n = st["steps_done"]
            bar.set_postfix_str(progress_words(st))
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


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m:02d}:{s:02d}" if m < 60 else f"{m // 60}:{m % 60:02d}:{s:02d}"


def progress_words(st: dict[str, Any]) -> str:
    """One line for a run's status (the CLI's progress bar; the dashboard says the same in its words)."""
    state, elapsed = st["state"], _clock(st.get("elapsed_s") or 0.0)
    if state == "starting":
        phases = ", ".join(f"{s}: {p}" for s, p in enumerate(st.get("stage_states", [])))
        return f"starting {elapsed} ({phases})"
    if st.get("open_recoveries"):
        down = "; ".join(f"stage {r['stage']} down — {'rolling every stage back' if r['kind'] == 'global' else 'restarting'}"
                         f" ({r['down_s']:.1f} s)" for r in st["open_recoveries"])
        return f"{down}; elapsed {elapsed}"
    if state == "finishing":
        ev = st.get("eval_progress")
        if ev and ev.get("total"):
            return f"evaluating the final weights: {ev['scored']}/{ev['total']} examples; elapsed {elapsed}"
        return f"evaluating the final weights ({(ev or {}).get('phase', 'starting')}); elapsed {elapsed}"
    if st.get("s_per_step") is not None:
        return f"{state}, {st['s_per_step']:.2f} s/step, ETA {_clock(st['eta_s'])}, elapsed {elapsed}"
    return f"{state}, elapsed {elapsed}"
