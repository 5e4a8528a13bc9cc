"""Run tab: the form, Run and Stop."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from zerolock_core.config import FAILURE_MODES, ConfigError
from zerolock_core.field_words import FORM, render
from zerolock_core.vocabulary import failure_choice

from .controller import EngineController
from .page_script import ADVANCED_CLASS
from .form import (METHOD_CHOICES, NO_FAILURE, READOUT_CHOICES, REFERENCE_METHODS, RunForm, configs_for,
                   form_from_values, readout_of)

LINK_CHOICES = (("none (no emulation)", "none"), ("local (1 Gbps)", "local"), ("Wi-Fi (300 Mbps, 5 ms)", "wifi"),
                ("mobile (100 Mbps, 15 ms)", "mobile"), ("constrained (50 Mbps, 30 ms)", "constrained"))


@dataclass(kw_only=True)
class RunTab:
    inputs: list[gr.components.Component]
    run: gr.Button
    stop: gr.Button
    message: gr.Markdown


def _label(key: str, hint: str = "") -> str:
    """The form's label of a field: the same words its error messages use (run_fields.py defines them)."""
    return f"{FORM.name(key)} ({hint})" if hint else FORM.name(key)


def build_run_tab(defaults: RunForm = RunForm()) -> RunTab:
    d = defaults
    # integer fields keep precision=None: Gradio would round 2.5 to 2 before the form could refuse it
    whole = dict(precision=None)
    gr.Markdown("Fine-tune the embedded tiny model (2 M parameters, no download) on the embedded `topics` "
                "dataset. Several methods run one after another on the same config; see them side by side "
                "in **Compare**.")
    methods = gr.CheckboxGroup(choices=list(METHOD_CHOICES), value=list(d.methods), label="method(s)")
    with gr.Row():
        stages = gr.Number(d.stages, label=_label("stages"), **whole)
        batch = gr.Number(d.batch, label=_label("batch"), **whole)
        micro = gr.Number(d.microbatches, label=_label("microbatches"), **whole)
        steps = gr.Number(d.steps, label=_label("steps"), **whole)
    with gr.Row():
        alpha = gr.Textbox(d.alpha, label=_label("alpha", "one value, or one per stage: 1,0.5,0.5"))
        consistency = gr.Radio([("reverse: KL(p_k ‖ p_k−1), paper Eq. 5", "reverse"),
                                ("forward: KL(p_k−1 ‖ p_k), authors' code", "forward")],
                               value=d.consistency, label=_label("consistency"))
    with gr.Row():
        readout = gr.Dropdown(list(READOUT_CHOICES), value=d.readout, label=_label("readout", "ZeroLock's chunks"),
                              elem_id="readout-choice")
        link = gr.Dropdown(list(LINK_CHOICES), value=d.link, label=_label("profile", "pipeline methods"))
        seed = gr.Number(d.seed, label=_label("seed"), **whole)
    with gr.Row(equal_height=True):  # a failure at a known step: a class watches it without racing the run
        fail_mode = gr.Dropdown([("none", NO_FAILURE), *((failure_choice(m), m) for m in FAILURE_MODES)],
                                value=d.fail_mode,
                                label=_label("failures", "pipeline methods"), elem_id="schedule-failure-mode")
        fail_stage = gr.Number(d.fail_stage, label=_label("fail_stage"), elem_id="schedule-failure-stage", **whole)
        fail_step = gr.Number(d.fail_step, label=_label("fail_step", "once it has done this many steps"),
                              elem_id="schedule-failure-step", **whole)
    with gr.Accordion("more", open=False, elem_classes=[ADVANCED_CLASS]):
        with gr.Row():
            seq_len = gr.Number(d.seq_len, label=_label("seq_len"), **whole)
            eval_size = gr.Number(d.eval_size, label=_label("eval_size", "0 = all 1000"), **whole)
            lr = gr.Number(d.lr, label=_label("lr"))
    with gr.Row():
        run = gr.Button("Run", variant="primary", elem_id="run-button")
        stop = gr.Button("Stop", variant="stop", elem_id="stop-button")
    message = gr.Markdown(elem_id="run-message")
    return RunTab(inputs=[methods, stages, batch, micro, alpha, consistency, steps, seed, link, seq_len, eval_size,
                          lr, fail_stage, fail_step, fail_mode, readout], run=run, stop=stop, message=message)


def cannot_start(reasons: str) -> str:
    """Why the form cannot start, one reason a line: after the heading when there is one, else a list."""
    lines = reasons.splitlines()
    if len(lines) == 1:
        return f"⚠️ **Cannot start:** {lines[0]}"
    return "⚠️ **Cannot start:**\n" + "\n".join(f"- {line}" for line in lines)


def start_runs(controller: EngineController, methods, stages, batch, microbatches, alpha, consistency, steps,
               seed, link, seq_len, eval_size, lr, fail_stage=RunForm.fail_stage, fail_step=RunForm.fail_step,
               fail_mode=RunForm.fail_mode, readout=RunForm.readout) -> tuple[str, bool]:
    """Validate everything (preflight: no directory, file or process before that), then start;
    returns (message, started). Bad input is explained in the form's words, never raised."""
    try:
        form = form_from_values(methods=methods, stages=stages, batch=batch, microbatches=microbatches,
                                alpha=alpha, consistency=consistency, steps=steps, seed=seed, link=link,
                                seq_len=seq_len, eval_size=eval_size, lr=lr, fail_stage=fail_stage,
                                fail_step=fail_step, fail_mode=fail_mode, readout=readout)
        configs = configs_for(form, out_for=lambda m: str(controller.new_run_dir(m, form.stages)))
    except ConfigError as err:
        return cannot_start(render(err, FORM)), False
    except ValueError as err:
        return cannot_start(str(err)), False
    try:
        tracked = controller.start(configs)
    except RuntimeError as err:
        return f"⚠️ {err}", False
    names = ", ".join(f"`{t.name}`" for t in tracked)
    extra = ""
    if "bp" in form.methods and form.link != "none":
        extra = " The BP reference runs in one process, so the link setting does not apply to it."
    others = sorted({m for m in form.methods if readout_of(form, m) != form.readout})
    if others:
        extra += f" {', '.join(others)} read{'s' if len(others) == 1 else ''} through the head: {form.readout} is a " \
                 "readout of ZeroLock's chunks before the last."
    if form.failures:
        extra += f" Scheduled: stage {form.fail_stage} fails at step {form.fail_step}: {failure_choice(form.fail_mode)}"
        extra += " (not in the BP reference: one process)." if set(form.methods) & set(REFERENCE_METHODS) else "."
    return f"Started {len(tracked)} run(s), one after another: {names}.{extra}", True
