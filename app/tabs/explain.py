"""Explain tab: the paper's Fig. 1 from the schedule simulator, redrawn at once for any K and m."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from zerolock_core.viz.palette import method_label

from ..explain import BP_METHODS, explain
from ..figures.training import placeholder_figure


@dataclass(kw_only=True)
class ExplainTab:
    inputs: list[gr.components.Component]
    outputs: list[gr.components.Component]


def build_explain_tab() -> ExplainTab:
    with gr.Row():
        k = gr.Slider(2, 8, value=3, step=1, label="stages K", elem_id="explain-k")
        m = gr.Slider(1, 12, value=4, step=1, label="micro-batches m", elem_id="explain-m")
        bp = gr.Radio([(method_label(m), m) for m in BP_METHODS], value="gpipe", label="backprop pipeline",
                      elem_id="explain-bp")
    text = gr.Markdown(elem_id="explain-text")
    timeline = gr.Plot(show_label=False, elem_id="explain-timeline")
    memory = gr.Plot(show_label=False, elem_id="explain-memory")
    return ExplainTab(inputs=[k, m, bp], outputs=[text, timeline, memory])


def draw(k: float, m: float, bp: str) -> tuple:
    """The figures for (K, m, bp); an invalid combination redraws both with the reason, so no figure
    of an earlier combination stays on screen beside it."""
    try:
        e = explain(stages=int(k), microbatches=int(m), bp_method=bp)
    except ValueError as err:
        why = f"Nothing to draw for K = {int(k)}, m = {int(m)}: {err}"
        return (f"⚠️ {why}", placeholder_figure(why, title="One optimizer step", height=200),
                placeholder_figure(why, title="Activations each stage holds", height=200))
    return e.text, e.timeline, e.memory
