"""Run tab: the form, Run and Stop."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from zerolock_core.config import ConfigError

from .controller import EngineController
from .form import METHOD_CHOICES, RunForm, configs_for, form_from_values

LINK_CHOICES = (("none (no emulation)", "none"), ("local (1 Gbps)", "local"), ("Wi-Fi (300 Mbps, 5 ms)", "wifi"),
                ("mobile (100 Mbps, 15 ms)", "mobile"), ("constrained (50 Mbps, 30 ms)", "constrained"))


@dataclass(kw_only=True)
class RunTab:
    inputs: list[gr.components.Component]
    run: gr.Button
    stop: gr.Button
    message: gr.Markdown


def build_run_tab(defaults: RunForm = RunForm()) -> RunTab:
    d = defaults
    gr.Markdown("Fine-tune the embedded tiny model (2 M parameters, no download) on the embedded `topics` "
                "dataset. Several methods run one after another on the same config; see them side by side "
                "in **Compare**.")
    methods = gr.CheckboxGroup(choices=list(METHOD_CHOICES), value=list(d.methods), label="method(s)")
    with gr.Row():
        stages = gr.Number(d.stages, precision=0, label="stages K")
        batch = gr.Number(d.batch, precision=0, label="batch b")
        micro = gr.Number(d.microbatches, precision=0, label="micro-batches m")
        steps = gr.Number(d.steps, precision=0, label="steps")
    with gr.Row():
        alpha = gr.Textbox(d.alpha, label="α (one value, or one per stage: 1,0.5,0.5)")
        consistency = gr.Radio([("reverse: KL(p_k ‖ p_k−1), paper Eq. 5", "reverse"),
                                ("forward: KL(p_k−1 ‖ p_k), authors' code", "forward")],
                               value=d.consistency, label="consistency direction")
    with gr.Row():
        link = gr.Dropdown(list(LINK_CHOICES), value=d.link, label="link between stages (pipeline methods)")
        seed = gr.Number(d.seed, precision=0, label="seed")
    with gr.Accordion("more", open=False):
        with gr.Row():
            seq_len = gr.Number(d.seq_len, precision=0, label="sequence length")
            eval_size = gr.Number(d.eval_size, precision=0, label="eval examples (0 = all 1000)")
            lr = gr.Number(d.lr, label="learning rate")
    with gr.Row():
        run = gr.Button("Run", variant="primary", elem_id="run-button")
        stop = gr.Button("Stop", variant="stop", elem_id="stop-button")
    message = gr.Markdown(elem_id="run-message")
    return RunTab(inputs=[methods, stages, batch, micro, alpha, consistency, steps, seed, link, seq_len, eval_size,
                          lr], run=run, stop=stop, message=message)


def start_runs(controller: EngineController, methods, stages, batch, microbatches, alpha, consistency, steps,
               seed, link, seq_len, eval_size, lr) -> tuple[str, bool]:
    """Validate everything, then start; returns (message, started). Bad input is explained, never raised."""
    try:
        form = form_from_values(methods=methods, stages=stages, batch=batch, microbatches=microbatches,
                                alpha=alpha, consistency=consistency, steps=steps, seed=seed, link=link,
                                seq_len=seq_len, eval_size=eval_size, lr=lr)
        configs = configs_for(form, out_for=lambda m: str(controller.new_run_dir(m, form.stages)))
    except (ConfigError, ValueError) as err:
        return f"⚠️ **Cannot start:** {err}", False
    try:
        tracked = controller.start(configs)
    except RuntimeError as err:
        return f"⚠️ {err}", False
    names = ", ".join(f"`{t.name}`" for t in tracked)
    extra = ""
    if "bp" in form.methods and form.link != "none":
        extra = " The BP reference runs in one process, so the link setting does not apply to it."
    return f"Started {len(tracked)} run(s), one after another: {names}.{extra}", True
