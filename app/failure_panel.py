"""The "Inject failure" panel: really kill (or hang) a stage process of the watched pipeline run and
report how the engine detected it, restored the stage and replayed (ZeroLock: that stage only;
GPipe / 1F1B: every stage rolls back)."""
from __future__ import annotations

import gradio as gr

from zerolock_core.config import FAILURE_MODES
from zerolock_core.runtime.run import Run

from .controller import EngineController

MODE_LABELS = {"kill": "kill (SIGKILL)", "stop": "hang (SIGSTOP)", "post-step": "die after its optimizer step",
               "mid-ckpt": "die while writing its checkpoint"}


def recovery_line(run: Run | None) -> str:
    if run is None:
        return ""
    st = run.status()
    parts = [f"stage {s} recovering …" for s in st.get("recovering", [])]
    for r in st.get("recoveries", []):
        parts.append(f"stage {r['stage']} {r['mode']} → {r['kind']} recovery: detect {r['detect_s'] * 1e3:.0f} ms, "
                     f"restore {r['restore_s']:.2f} s, replay {r['replay_s']:.2f} s "
                     f"({r['replayed_microbatches']} micro-batches, {r['bytes_transferred'] / 2**20:.2f} MiB)")
    return "  \n".join(parts)


def _watched_run(controller: EngineController) -> Run | None:
    t = controller.watched()
    return t.engine if t is not None and isinstance(t.engine, Run) else None


def inject(controller: EngineController, stage: float, mode: str) -> str:
    run = _watched_run(controller)
    if run is None:
        return "Start a pipeline run first: failures are injected into the run being watched."
    try:
        run.inject_failure(int(stage), mode)
    except ValueError as err:
        return f"Cannot inject: {err}"
    return f"Injected {MODE_LABELS[mode]} into stage {int(stage)}. Watch its lane: the gap, RESTORE, REPLAY."


def watched_recovery_line(controller: EngineController) -> str:
    """The recovery line of the run being watched (redrawn by the Watch tab's timer)."""
    return recovery_line(_watched_run(controller))


def build_failure_panel(controller: EngineController) -> gr.Markdown:
    """The panel; returns its recovery line, which the Watch tab's poll keeps current."""
    with gr.Accordion("Inject failure", open=False, elem_id="failure-panel"):
        with gr.Row(equal_height=True):
            stage = gr.Number(value=1, precision=0, minimum=0, maximum=7, label="stage", elem_id="failure-stage")
            mode = gr.Radio([(MODE_LABELS[m], m) for m in FAILURE_MODES], value="kill", label="mode", elem_id="failure-mode")
            button = gr.Button("Inject failure", variant="stop", elem_id="inject-failure")
        result = gr.Markdown(elem_id="failure-result")
        line = gr.Markdown(elem_id="recovery-line")
        button.click(lambda s, m: inject(controller, s, m), inputs=[stage, mode], outputs=[result],
                     api_name="inject_failure")
    return line
