"""The Gradio Blocks app: Lessons | Run | Watch live | Compare | Explain | Readability | Runs, over one
EngineController."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gradio as gr

from zerolock_core.config.field_words import FORM, ConfigError, render
from zerolock_core.viz.poll_interval import DEFAULT_POLL_S, check_poll
from zerolock_core.rundir.runs_root import DEFAULT_RUNS

from .data_uploads import dataset_choices

READABILITY_AT_ONCE = 2
from .tabs import compare as tab_compare, explain as tab_explain, lessons as tab_lessons, readability as tab_readability, run as tab_run, runs as tab_runs, watch as tab_watch
from .controller import EngineController
from .page.page_script import (ADVANCED_CLASS, PRESENTER_FROM_URL_JS, PRESENTER_ID, PRESENTER_JS, SHOW_WATCH_JS, WATCH_TAB_ID,
                          launch_options)


def build_app(controller: EngineController | None = None, *, runs_root: str | Path = DEFAULT_RUNS,
              poll_s: float = DEFAULT_POLL_S) -> gr.Blocks:
    """The dashboard. One controller per app process: every browser session shares it."""
    check_poll(poll_s)
    controller = controller or EngineController(runs_root)
    with gr.Blocks(title="ZeroLock dashboard", analytics_enabled=False) as demo:
        demo.controller = controller  # the CLI closes it when the app ends (which stops its runs)
        # Gradio 6 takes the page's scripts and CSS at launch: every launcher passes demo.page_options()
        demo.page_options = functools.partial(launch_options, poll_s)
        with gr.Row(equal_height=True):
            gr.Markdown("## ZeroLock: pipeline fine-tuning without update locking", elem_classes=[ADVANCED_CLASS])
            presenter = gr.Checkbox(False, label="presenter view (large type, fewer details)", scale=0,
                                    min_width=260, elem_id=PRESENTER_ID)
        # Run / Open / Resume set it when they started or opened something; the step after them switches
        # the page to Watch live (SHOW_WATCH_JS). A gr.Tabs output would do it from the server, but then
        # every later Gradio event of the session snapshots the whole Tabs subtree in the browser.
        show_watch = gr.Checkbox(False, visible=False)
        # the dashboard opens on the Lessons: what a newcomer or a class meets first
        with gr.Tabs(selected="lessons", elem_id="tabs"):
            with gr.Tab("Lessons", id="lessons", elem_id="tab-lessons") as lessons_item:
                lessons = tab_lessons.build_lessons_tab()
            with gr.Tab("Run", id="run", elem_id="tab-run"):
                run_tab = tab_run.build_run_tab(runs_root=controller.runs_root)
            with gr.Tab("Watch live", id="watch", elem_id=WATCH_TAB_ID):
                watch = tab_watch.build_watch_tab(controller)
            with gr.Tab("Compare", id="compare", elem_id="tab-compare") as compare_item:
                cmp = tab_compare.build_compare_tab()
            with gr.Tab("Explain", id="explain", elem_id="tab-explain"):
                expl = tab_explain.build_explain_tab()
            with gr.Tab("Readability", id="readability", elem_id="tab-readability") as readability_item:
                readability = tab_readability.build_readability_tab()
            with gr.Tab("Runs", id="runs", elem_id="tab-runs") as runs_item:
                runs = tab_runs.build_runs_tab(controller.runs_root)

        # two measurements at once (a class's second student does not wait); a third is queued, and Gradio's
        # progress shows its place in the queue
        def on_measure(model, dataset, stages, examples, fit, top=True, run=tab_readability.PRETRAINED,
                       progress=gr.Progress()) -> tuple:
            return tab_readability.measure(model, dataset, stages, examples, fit, top, run, root=controller.root,
                                           progress=progress)

        readability.button.click(on_measure, readability.inputs, readability.outputs,
                                 api_name="readability", concurrency_limit=READABILITY_AT_ONCE)
        readability_item.select(lambda run: tab_readability.run_choices(controller.root, run), readability.inputs[-1],
                                readability.inputs[-1], show_progress="hidden")
        readability.inputs[-1].change(lambda run: tab_readability.picked_run_fields(controller.root, run),
                                      readability.inputs[-1], readability.inputs[:3], show_progress="hidden",
                                      queue=False)
        # until something is measured, the committed study: a student sees a readable result at once
        readability_item.select(tab_readability.recorded, readability.outputs[1], readability.outputs,
                                show_progress="hidden")

        # ---- Lessons -----------------------------------------------------------------------
        # a step's recording is drawn when the page opens (on this tab), the tab opens or the step changes
        shown = [lessons.step, presenter]
        lessons_item.select(tab_lessons.show, shown, lessons.outputs, show_progress="hidden")
        lessons.step.change(tab_lessons.show, shown, lessons.outputs, api_name="lesson", show_progress="hidden")
        # presenter view: the page's class at once (in the browser), the lesson's figure redrawn for it
        presenter.change(None, presenter, None, js=PRESENTER_JS).then(
            tab_lessons.show, shown, lessons.outputs, show_progress="hidden")
        # the page opens on the first step, drawn once the address has said whether to present
        demo.load(None, None, presenter, js=PRESENTER_FROM_URL_JS).then(
            tab_lessons.show, shown, lessons.outputs, show_progress="hidden")
        lessons.previous.click(lambda key: tab_lessons.neighbour(key, -1), lessons.step, lessons.step,
                               show_progress="hidden")
        lessons.next.click(lambda key: tab_lessons.neighbour(key, 1), lessons.step, lessons.step,
                           show_progress="hidden")
        lessons.live.click(lambda key: tab_lessons.run_live(controller, key), lessons.step,
                           [lessons.message, show_watch], api_name="lesson_live",
                           show_progress="hidden").then(None, show_watch, None, js=SHOW_WATCH_JS)

        # ---- Run / Stop --------------------------------------------------------------------
        def on_run(*values: Any) -> tuple[str, bool]:
            return tab_run.start_runs(controller, *values)

        run_tab.run.click(on_run, run_tab.inputs, [run_tab.message, show_watch], api_name="start_run",
                          show_progress="hidden").then(None, show_watch, None, js=SHOW_WATCH_JS)

        # your own data: an upload kept in the runs folder's data/, its fields, a preview
        data = run_tab.data
        demo.load(lambda: gr.update(choices=dataset_choices(controller.runs_root)), None, data.dataset,
                   show_progress="hidden")  # files uploaded since the app was built, from any page
        data.kind.change(tab_run.show_kind, data.kind, [data.classification, data.response], show_progress="hidden")
        # checked as the task the form's fields describe, at the form's sequence length (no preprocess:
        # take_upload says why)
        data.upload.upload(lambda *v: tab_run.take_upload(controller, *v),
                           [data.upload, data.dataset, data.kind, *data.fields, run_tab.seq_len],
                           [data.dataset, data.shown, data.upload], api_name="upload_data", preprocess=False)
        data.delete.click(lambda choice: tab_run.delete_data(controller, choice), data.dataset,
                          [data.dataset, data.shown], api_name="delete_data")
        data.preview.click(lambda *v: tab_run.preview_data(controller, *v),
                           [data.dataset, data.kind, *data.fields, run_tab.seq_len], data.shown,
                           api_name="preview_data")

        def on_stop() -> str:
            return controller.stop()

        run_tab.stop.click(on_stop, None, run_tab.message, api_name="stop_run", show_progress="hidden")

        # ---- Watch live --------------------------------------------------------------------
        # fetched and drawn by the page's script (page_script.js): no Gradio event per update
        def watch_line() -> dict:
            return tab_watch.watch_line(controller)

        gr.api(watch_line, api_name="watch_line", queue=False)

        def watch_figures(seen: dict | None, window: str, unit: str, parts: list[str]) -> dict:
            return tab_watch.watch_figures(controller, seen, window, unit, parts)

        gr.api(watch_figures, api_name="watch_figures", queue=False)

        def status() -> dict:
            return tab_watch.watched_status(controller)

        gr.api(status, api_name="status")

        # ---- Compare -----------------------------------------------------------------------
        def on_compare_tab() -> tuple:
            names, chosen = tab_compare.labelled_run_choices(controller)
            return (gr.Dropdown(choices=names, value=chosen), *tab_compare.compare(controller, chosen))

        compare_item.select(on_compare_tab, None, [cmp.runs, *cmp.outputs], show_progress="hidden")
        cmp.show.click(lambda names: tab_compare.compare(controller, names), cmp.runs, cmp.outputs,
                       api_name="compare")

        # ---- Explain -----------------------------------------------------------------------
        for widget in expl.inputs:
            widget.change(tab_explain.draw, expl.inputs, expl.outputs, show_progress="hidden")
        demo.load(tab_explain.draw, expl.inputs, expl.outputs, api_name="explain")

        # ---- Runs --------------------------------------------------------------------------
        def on_refresh(current: str | None) -> tuple:
            return tab_runs.refresh(controller, current)

        runs.refresh.click(on_refresh, runs.run, [runs.table, runs.run], api_name="list_runs")
        runs_item.select(on_refresh, runs.run, [runs.table, runs.run], show_progress="hidden")

        def then_watch(act, done: str, window: str):
            """A Runs-tab button that acts on the chosen run, then switches to Watch (or says why not)."""
            def handler(name: str | None) -> tuple:
                if not name:
                    return "Choose a run first.", gr.skip(), False
                try:
                    act(name)  # a run id: the controller resolves it inside the runs root, or refuses
                except ConfigError as err:  # in the dashboard's words
                    return f"⚠️ {render(err, FORM)}", gr.skip(), False
                except (RuntimeError, ValueError, FileNotFoundError) as err:
                    return f"⚠️ {err}", gr.skip(), False
                return done.format(name=name), window, True
            return handler

        # a reopened run opens on the whole run (its story, failures included), a resumed one live
        opened = [runs.message, watch.window, show_watch]
        runs.open.click(then_watch(controller.open, "Opened `{name}`.", tab_watch.WHOLE), runs.run,
                        opened, api_name="open_run").then(None, show_watch, None, js=SHOW_WATCH_JS)
        runs.resume.click(then_watch(controller.resume, "Resuming `{name}` from its checkpoints.", tab_watch.RECENT),
                          runs.run, opened, api_name="resume_run").then(None, show_watch, None, js=SHOW_WATCH_JS)
        # the old file goes at once and the wait is said: a PNG takes 10-15 s on 2 cores
        runs.export.click(lambda kind: (None, f"Exporting {kind} …"), runs.export_kind, [runs.file, runs.message],
                          show_progress="hidden", queue=False).then(
            lambda name, kind: tab_runs.export(controller, name, kind), [runs.run, runs.export_kind],
            [runs.file, runs.message], api_name="export")
        runs.try_button.click(lambda name, *values: tab_runs.try_it(controller, name, *values),
                              [runs.run, *runs.try_inputs], [runs.try_table, runs.try_message], api_name="try_it")
        runs.table.select(tab_runs.picked_row, runs.table, runs.run, show_progress="hidden")
        runs.run.change(lambda name: tab_runs.trace_file(controller, name), runs.run, runs.trace,
                        show_progress="hidden", api_name="trace")
        runs.delete.click(lambda name, ok: tab_runs.delete_run(controller, name, ok), [runs.run, runs.confirm],
                          [runs.message, runs.table, runs.run, runs.confirm], api_name="delete_run")
    return demo
