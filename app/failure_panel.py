"""The "Inject failure" panel: really kill (or hang) a stage process of the watched pipeline run and
report how the engine detected it, restored the stage and replayed (ZeroLock: that stage only;
GPipe / 1F1B: every stage rolls back).

What the panel last said about a run is kept with that run (`Tracked.inject_note`) and shown by the
page's script from `watch_line`: when another run is watched, the panel says nothing about the old one."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from zerolock_core.config.run_config import FAILURE_MODES
from zerolock_core.jobs.pipeline_job import Run
from zerolock_core.vocabulary import STRAGGLER, failure_choice

from .controller import EngineController
from .page.page_script import INJECT_ID, RECOVERY_ID, line_box
from .toasts import warn

NO_RUN = "Start a pipeline run first: failures are injected into the run being watched."


@dataclass(frozen=True)
class Injection:
    text: str
    done: bool  # False: refused, and `text` says why


def _watched_run(controller: EngineController) -> Run | None:
    t = controller.watched()
    return t.engine if t is not None and isinstance(t.engine, Run) else None


def _stage_range(stages: int) -> str:
    return "stage 0" if stages == 1 else f"stages 0..{stages - 1}"


def _attempt(run: Run | None, stage: float | None, mode: str) -> Injection:
    if run is None:
        return Injection(text=NO_RUN, done=False)
    stages = run.cfg.train.stages
    if stage is None or not float(stage).is_integer() or not 0 <= stage < stages:
        return Injection(text=f"Cannot inject: stage {stage if stage is not None else '(empty)'} is not a stage of "
                              f"the watched run, which has K = {stages}: choose {_stage_range(stages)}.", done=False)
    try:
        run.inject_failure(int(stage), mode)
    except ValueError as err:
        return Injection(text=f"Cannot inject: {err}", done=False)
    watch = "its bars grow longer, nothing to recover" if mode == STRAGGLER else "the gap, RESTORE, REPLAY"
    return Injection(text=f"Injected into stage {int(stage)}: {failure_choice(mode)}. Watch its lane: {watch}.",
                     done=True)


def inject(controller: EngineController, stage: float | None, mode: str) -> Injection:
    """Fail `stage` of the watched run now, or say why not; what it says is kept as the run's note."""
    t = controller.watched()
    outcome = _attempt(_watched_run(controller), stage, mode)
    if t is not None:
        t.inject_note = outcome.text
    return outcome


def on_inject(controller: EngineController, stage: float | None, mode: str) -> str:
    """The button: a refusal is a warning toast too (the result line keeps it after the toast has gone)."""
    outcome = inject(controller, stage, mode)
    if not outcome.done:
        warn(outcome.text)
    return line_box(outcome.text)


def stage_control(controller: EngineController) -> gr.Number:
    """The stage field's label names the watched run's stages (redrawn when the panel opens: the watched
    run may have changed since; in the label, not a hint under it: the open panel stays one short row).
    No bounds on the field: Gradio would refuse a value out of them with a toast of its own words and
    length; inject() refuses it in the panel's."""
    run = _watched_run(controller)
    if run is None:
        return gr.Number(label="stage (of the watched pipeline run)")
    stages = run.cfg.train.stages
    return gr.Number(label=f"stage (K = {stages}: {_stage_range(stages)})")


def build_failure_panel(controller: EngineController) -> gr.HTML:
    """The panel; returns its recovery line, which the page's script keeps current (tab_watch.watch_line)."""
    with gr.Accordion("Inject failure", open=False, elem_id="failure-panel") as panel:
        # one short row: opened during a run, the panel must leave the timeline on a 720-pixel screen
        with gr.Row(equal_height=True):
            # precision=None: 1.5 is refused by inject(), not rounded
            stage = gr.Number(value=1, label="stage", elem_id="failure-stage", scale=1, min_width=160)
            mode = gr.Dropdown([(failure_choice(m), m) for m in FAILURE_MODES], value="kill", label="mode",
                               elem_id="failure-mode", scale=2, min_width=240)
            button = gr.Button("Inject failure", variant="stop", elem_id="inject-failure", scale=1, min_width=160)
        # the watched run's note, which the page's script keeps current
        result = gr.HTML(line_box(), elem_id=INJECT_ID)
        button.click(lambda s, m: on_inject(controller, s, m), inputs=[stage, mode], outputs=[result],
                     api_name="inject_failure")
        # the hint is redrawn when the panel opens, not while the field is being typed in: an update that
        # lands after a keystroke re-renders the field (a CI run saw a typed 0 injected as the initial 1)
        panel.expand(lambda: stage_control(controller), None, stage, show_progress="hidden", queue=False)
    # outside the (collapsed) panel: a scheduled failure's story shows without opening it
    return gr.HTML(line_box(), elem_id=RECOVERY_ID)
