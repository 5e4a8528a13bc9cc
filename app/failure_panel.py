"""The "Inject failure" panel: really kill (or hang) a stage process of the watched pipeline run and
report how the engine detected it, restored the stage and replayed (ZeroLock: that stage only;
GPipe / 1F1B: every stage rolls back)."""
from __future__ import annotations

import gradio as gr

from zerolock_core.config import FAILURE_MODES
from zerolock_core.runtime.run import Run

from .controller import EngineController
from .page_script import RECOVERY_ID, line_box

MODE_LABELS = {"kill": "kill (SIGKILL)", "stop": "hang (SIGSTOP)", "post-step": "die after its optimizer step",
               "mid-ckpt": "die while writing its checkpoint"}


def _watched_run(controller: EngineController) -> Run | None:
    t = controller.watched()
    return t.engine if t is not None and isinstance(t.engine, Run) else None


def _stage_range(stages: int) -> str:
    return "stage 0" if stages == 1 else f"stages 0..{stages - 1}"


def inject(controller: EngineController, stage: float | None, mode: str) -> str:
    run = _watched_run(controller)
    if run is None:
        return "Start a pipeline run first: failures are injected into the run being watched."
    stages = run.cfg.train.stages
    if stage is None or not float(stage).is_integer() or not 0 <= stage < stages:
        return (f"Cannot inject: stage {stage if stage is not None else '(empty)'} is not a stage of the watched "
                f"run, which has K = {stages}: choose {_stage_range(stages)}.")
    try:
        run.inject_failure(int(stage), mode)
    except ValueError as err:
        return f"Cannot inject: {err}"
    return f"Injected {MODE_LABELS[mode]} into stage {int(stage)}. Watch its lane: the gap, RESTORE, REPLAY."


def stage_control(controller: EngineController) -> gr.Number:
    """The stage field bounded by the watched run's K (redrawn when the panel opens or the field is focused:
    the watched run may have changed since)."""
    run = _watched_run(controller)
    if run is None:
        return gr.Number(maximum=None, info="the stage of the watched pipeline run")
    stages = run.cfg.train.stages
    return gr.Number(maximum=stages - 1, info=f"the watched run has K = {stages}: {_stage_range(stages)}")


def build_failure_panel(controller: EngineController) -> gr.HTML:
    """The panel; returns its recovery line, which the page's script keeps current (tab_watch.watch_line)."""
    with gr.Accordion("Inject failure", open=False, elem_id="failure-panel") as panel:
        with gr.Row(equal_height=True):
            # precision=None: 1.5 is refused by inject(), not rounded; the maximum follows the watched run
            stage = gr.Number(value=1, minimum=0, label="stage", elem_id="failure-stage")
            mode = gr.Radio([(MODE_LABELS[m], m) for m in FAILURE_MODES], value="kill", label="mode", elem_id="failure-mode")
            button = gr.Button("Inject failure", variant="stop", elem_id="inject-failure")
        result = gr.Markdown(elem_id="failure-result")
        button.click(lambda s, m: inject(controller, s, m), inputs=[stage, mode], outputs=[result],
                     api_name="inject_failure")
        for event in (panel.expand, stage.focus):
            event(lambda: stage_control(controller), None, stage, show_progress="hidden", queue=False)
    # outside the (collapsed) panel: a scheduled failure's story shows without opening it
    return gr.HTML(line_box(), elem_id=RECOVERY_ID)
