"""Run tab: the form, Run and Stop."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from zerolock_core.config.run_config import FAILURE_MODES
from zerolock_core.config.field_words import FORM, ConfigError, render
from zerolock_core.vocabulary import failure_choice

from ..controller import EngineController
from ..data_preview import CLASSIFICATION_KIND, DATA_KINDS, RESPONSE_KIND, DataFields, check_data, preview_html
from ..data_uploads import (BUILT_IN_CHOICES, UPLOAD_KINDS, UPLOAD_LIMIT_BYTES, dataset_choices, dataset_spec,
                            delete_upload, save_upload)
from ..gradio_temp import discard_upload
from ..page.page_script import ADVANCED_CLASS
from ..form import (METHOD_CHOICES, NO_FAILURE, READOUT_CHOICES, RECOMPUTE_CHOICES, REFERENCE_METHODS, RunForm,
                   configs_for, form_from_values, readout_of)
from ..frontier_summary import recommended_words

LINK_CHOICES = (("none (no emulation)", "none"), ("local (1 Gbps)", "local"), ("Wi-Fi (300 Mbps, 5 ms)", "wifi"),
                ("mobile (100 Mbps, 15 ms)", "mobile"), ("constrained (50 Mbps, 30 ms)", "constrained"))


@dataclass(kw_only=True)
class DataPanel:
    """The Run form's data: a built-in dataset or an uploaded file, its fields and a preview."""
    upload: gr.File
    dataset: gr.Dropdown
    delete: gr.Button  # the chosen uploaded file
    kind: gr.Radio
    classification: gr.Row
    response: gr.Row
    fields: list[gr.components.Component]  # text fields, label field, label words, prompt field, response field
    preview: gr.Button
    shown: gr.HTML


@dataclass(kw_only=True)
class RunTab:
    inputs: list[gr.components.Component]
    run: gr.Button
    stop: gr.Button
    message: gr.Markdown
    data: DataPanel
    seq_len: gr.Number  # the preview encodes rows at the form's sequence length


def _label(key: str, hint: str = "") -> str:
    """The form's label of a field: the same words its error messages use, and its bound (run_fields.py)."""
    return FORM.label(key, hint)


def build_run_tab(defaults: RunForm = RunForm(), runs_root: Path | None = None) -> RunTab:
    d = defaults
    # integer fields keep precision=None: Gradio would round 2.5 to 2 before the form could refuse it
    whole = dict(precision=None)
    gr.Markdown("Fine-tune the embedded tiny model (2 M parameters, no download) on the embedded `topics` "
                "dataset. Several methods run one after another on the same config; see them side by side "
                "in **Compare**.")
    methods = gr.CheckboxGroup(choices=list(METHOD_CHOICES), value=list(d.methods), label="method(s)")
    price = recommended_words()  # the marked method's measured price, one line under the methods
    if price:
        gr.Markdown(price, elem_id="recommended-price")
    with gr.Row():
        stages = gr.Number(d.stages, label=_label("stages"), **whole)
        batch = gr.Number(d.batch, label=_label("batch"), **whole)
        micro = gr.Number(d.microbatches, label=_label("microbatches"), **whole)
        steps = gr.Number(d.steps, label=_label("steps"), **whole)
        seed = gr.Number(d.seed, label=_label("seed"), **whole)
    with gr.Row():
        alpha = gr.Textbox(d.alpha, label=_label("alpha", "one value, or one per stage: 1,0.5,0.5"))
        consistency = gr.Radio([("reverse: KL(p_k ‖ p_k−1), paper Eq. 5", "reverse"),
                                ("forward: KL(p_k−1 ‖ p_k), authors' code", "forward")],
                               value=d.consistency, label=_label("consistency"))
    with gr.Row():
        readout = gr.Dropdown(list(READOUT_CHOICES), value=d.readout, label=_label("readout", "ZeroLock's chunks"),
                              elem_id="readout-choice")
        recompute = gr.Dropdown(list(RECOMPUTE_CHOICES), value=d.recompute,
                                label=_label("recompute", "gradients unchanged"), elem_id="recompute-choice")
        link = gr.Dropdown(list(LINK_CHOICES), value=d.link, label=_label("profile", "pipeline methods"))
    with gr.Row(equal_height=True):  # a failure at a known step: a class watches it without racing the run
        fail_mode = gr.Dropdown([("none", NO_FAILURE), *((failure_choice(m), m) for m in FAILURE_MODES)],
                                value=d.fail_mode,
                                label=_label("failures", "pipeline methods"), elem_id="schedule-failure-mode")
        fail_stage = gr.Number(d.fail_stage, label=_label("fail_stage"), elem_id="schedule-failure-stage", **whole)
        fail_step = gr.Number(d.fail_step, label=_label("fail_step", "once it has done this many steps"),
                              elem_id="schedule-failure-step", **whole)
    data = _data_panel(defaults, runs_root)
    with gr.Accordion("more", open=False, elem_classes=[ADVANCED_CLASS]):
        with gr.Row():
            seq_len = gr.Number(d.seq_len, label=_label("seq_len"), **whole)
            eval_size = gr.Number(d.eval_size, label=_label("eval_size", "0 = all 1000"), **whole)
            lr = gr.Number(d.lr, label=_label("lr"))
            tensorboard = gr.Checkbox(d.tensorboard, label=_label("tensorboard", "RUN/tensorboard/"),
                                      elem_id="tensorboard-choice")
    with gr.Row():
        run = gr.Button("Run", variant="primary", elem_id="run-button")
        stop = gr.Button("Stop", variant="stop", elem_id="stop-button")
    message = gr.Markdown(elem_id="run-message")
    return RunTab(inputs=[methods, stages, batch, micro, alpha, consistency, steps, seed, link, seq_len, eval_size,
                          lr, fail_stage, fail_step, fail_mode, readout, data.dataset, data.kind, *data.fields,
                          tensorboard, recompute],
                  run=run, stop=stop, message=message, data=data, seq_len=seq_len)


def _data_panel(d: RunForm, runs_root: Path | None) -> DataPanel:
    limit = f"{UPLOAD_LIMIT_BYTES / 2**20:.0f} MiB"
    with gr.Accordion("data: built in, or your own file", open=False, elem_classes=[ADVANCED_CLASS]):
        with gr.Row(equal_height=True):
            dataset = gr.Dropdown(dataset_choices(runs_root) if runs_root else list(BUILT_IN_CHOICES),
                                  value=d.dataset, label=_label("dataset"), elem_id="data-choice",
                                  allow_custom_value=True)  # refused by name in data_uploads.dataset_spec
            delete = gr.Button("Delete this uploaded file", variant="secondary", scale=0, min_width=200,
                               elem_id="data-delete")
        kind = gr.Radio(list(DATA_KINDS), value=d.data.kind, label="the task in your file", elem_id="data-kind")
        with gr.Row(visible=d.data.kind == CLASSIFICATION_KIND) as classification:
            text_fields = gr.Textbox(d.data.text_fields, label=_label("text_fields", "comma-separated; "
                                                                                    "default text, else title,description, else question"),
                                     elem_id="data-text-fields")
            label_field = gr.Textbox(d.data.label_field, label=_label("label_field", "default label"),
                                     elem_id="data-label-field")
            label_words = gr.Textbox(d.data.label_words, label=_label("label_words", "in class order; default: "
                                                                                    "the data's labels"),
                                     elem_id="data-label-words")
        with gr.Row(visible=d.data.kind == RESPONSE_KIND) as response:
            prompt_field = gr.Textbox(d.data.prompt_field, label=_label("prompt_field"), elem_id="data-prompt-field")
            response_field = gr.Textbox(d.data.response_field, label=_label("response_field"),
                                        elem_id="data-response-field")
        # below the fields: an upload is checked in full as the task they describe before it is kept
        upload = gr.File(label=f"upload a file (.csv with a header row, .jsonl or .parquet; up to {limit}), "
                               "checked as the task above: name its fields first",
                         file_types=list(UPLOAD_KINDS), type="filepath", elem_id="data-upload", height=90)
        preview = gr.Button("Preview the first rows", elem_id="data-preview-button")
        shown = gr.HTML(elem_id="data-preview")
    return DataPanel(upload=upload, dataset=dataset, delete=delete, kind=kind, classification=classification,
                     response=response, fields=[text_fields, label_field, label_words, prompt_field, response_field],
                     preview=preview, shown=shown)


def show_kind(kind: str) -> tuple:
    """The fields of the chosen kind of task."""
    return gr.update(visible=kind != RESPONSE_KIND), gr.update(visible=kind == RESPONSE_KIND)


def data_fields(kind: str, text_fields: str, label_field: str, label_words: str, prompt_field: str,
                response_field: str) -> DataFields:
    return DataFields(kind=kind, text_fields=text_fields or "", label_field=label_field or "",
                      label_words=label_words or "", prompt_field=prompt_field or "",
                      response_field=response_field or "")


def form_seq_len(seq_len: object) -> int:
    """The form's sequence length for reading data, or the default while the field holds no whole number."""
    return int(seq_len) if isinstance(seq_len, (int, float)) and seq_len == int(seq_len) else RunForm.seq_len


def take_upload(controller: EngineController, upload: dict | None, choice: str | None, kind: str,
                text_fields: str, label_field: str, label_words: str, prompt_field: str, response_field: str,
                seq_len: object) -> tuple:
    """A file the browser uploaded, checked in full as the task the form's fields describe (the checks a Run
    makes), then kept in the runs folder's data/ and chosen; or why not, the dataset choice left as it
    was. Gradio's own copy is deleted either way; the upload box is emptied for the next file.

    The event runs without Gradio's preprocessing (`preprocess=False`: the values as sent, the upload as
    Gradio's FileData, its path checked by Gradio to lie in its upload folder): gr.File's preprocess leaves
    an empty temporary file in that folder for every upload (Gradio 6.31)."""
    uploaded = upload.get("path") if isinstance(upload, dict) else None
    if not uploaded:
        return gr.skip(), "", gr.skip()
    fields = data_fields(kind, text_fields, label_field, label_words, prompt_field, response_field)
    try:
        name = save_upload(controller.runs_root, uploaded, check=lambda spec: check_data(
            fields.data_config(spec, seq_len=form_seq_len(seq_len), eval_size=RunForm.eval_size),
            model=RunForm.model))
    except (ValueError, OSError) as err:
        kept = f"the dataset is still <b>{html_text(choice)}</b>" if choice else "no dataset is chosen"
        return (gr.update(choices=dataset_choices(controller.runs_root), value=choice),
                f"<p>⚠️ {html_text(controller.said(err))}</p><p>Nothing was kept; {kept}.</p>", None)
    finally:
        discard_upload(uploaded)
    return (gr.update(choices=dataset_choices(controller.runs_root), value=name),
            f"<p>Uploaded <b>{html_text(name)}</b> and chose it: preview it, or run.</p>", None)


def delete_data(controller: EngineController, choice: str | None) -> tuple:
    """Delete the chosen uploaded file; the choice goes back to the built-in dataset, and the line says so."""
    try:
        name = delete_upload(controller.runs_root, choice or "")
    except ValueError as err:
        return gr.skip(), f"<p>⚠️ {html_text(controller.said(err))}</p>"
    return (gr.update(choices=dataset_choices(controller.runs_root), value=RunForm.dataset),
            f"<p>Deleted <b>{html_text(name)}</b>; the dataset is now <b>{html_text(RunForm.dataset)}</b>.</p>")


def preview_data(controller: EngineController, choice: str, kind: str, text_fields: str, label_field: str,
                 label_words: str, prompt_field: str, response_field: str, seq_len: object) -> str:
    """The first rows of the chosen data as the model will see them, or what is wrong with it."""
    fields = data_fields(kind, text_fields, label_field, label_words, prompt_field, response_field)
    try:
        data = fields.data_config(dataset_spec(controller.runs_root, choice), seq_len=form_seq_len(seq_len),
                                  eval_size=RunForm.eval_size)
        return preview_html(data, model=RunForm.model)
    except ValueError as err:
        return f"<p>⚠️ {html_text(controller.said(err))}</p>"


def html_text(err: object) -> str:
    import html

    return html.escape(str(err))


def cannot_start(reasons: str) -> str:
    """Why the form cannot start, one reason a line: after the heading when there is one, else a list."""
    lines = reasons.splitlines()
    if len(lines) == 1:
        return f"⚠️ **Cannot start:** {lines[0]}"
    return "⚠️ **Cannot start:**\n" + "\n".join(f"- {line}" for line in lines)


def start_runs(controller: EngineController, methods, stages, batch, microbatches, alpha, consistency, steps,
               seed, link, seq_len, eval_size, lr, fail_stage=RunForm.fail_stage, fail_step=RunForm.fail_step,
               fail_mode=RunForm.fail_mode, readout=RunForm.readout, dataset=RunForm.dataset,
               data_kind=DataFields.kind, text_fields="", label_field="", label_words="", prompt_field="",
               response_field="", tensorboard=RunForm.tensorboard, recompute=RunForm.recompute) -> tuple[str, bool]:
    """Validate everything (preflight: no directory, file or process before that), then start;
    returns (message, started). Bad input is explained in the form's words, never raised."""
    try:
        form = form_from_values(methods=methods, stages=stages, batch=batch, microbatches=microbatches,
                                alpha=alpha, consistency=consistency, steps=steps, seed=seed, link=link,
                                seq_len=seq_len, eval_size=eval_size, lr=lr, fail_stage=fail_stage,
                                fail_step=fail_step, fail_mode=fail_mode, readout=readout, dataset=dataset,
                                data_kind=data_kind, text_fields=text_fields, label_field=label_field,
                                label_words=label_words, prompt_field=prompt_field, response_field=response_field,
                                tensorboard=tensorboard, recompute=recompute)
        form = dataclasses.replace(form, dataset=dataset_spec(controller.runs_root, form.dataset))
        configs = configs_for(form, out_for=lambda m: str(controller.new_run_dir(m, form.stages)))
    except ConfigError as err:
        return cannot_start(controller.said(render(err, FORM))), False
    except ValueError as err:
        return cannot_start(controller.said(err)), False
    try:
        tracked = controller.start(configs)
    except RuntimeError as err:
        return f"⚠️ {controller.said(err)}", False
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
