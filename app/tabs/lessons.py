"""Lessons tab: the paper's story in five steps (app/lessons.py). Choosing a step shows its recorded
example at once (no typing, no waiting, offline); "Run it live" makes the same runs again and
switches to Watch live."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from zerolock_core.config.field_words import FORM, ConfigError, render

from ..controller import EngineController
from ..form import configs_for
from ..figures.lessons import lesson_figures, present
from ..lessons import LESSONS, Lesson, lesson
from ..page.page_script import ADVANCED_CLASS

STEP_ID, NARRATION_ID, FIGURE_ID, SECOND_ID, LIVE_ID = (
    "lesson-step", "lesson-narration", "lesson-figure", "lesson-figure-2", "lesson-live")
TITLES = [(item.title, item.key) for item in LESSONS]


@dataclass(kw_only=True)
class LessonsTab:
    step: gr.Radio
    narration: gr.Markdown
    figure: gr.Plot
    second: gr.Plot
    previous: gr.Button
    next: gr.Button
    live: gr.Button
    message: gr.Markdown

    @property
    def outputs(self) -> list[gr.components.Component]:
        return [self.narration, self.figure, self.second, self.live]


BODY_ID = "lesson-body"


def build_lessons_tab() -> LessonsTab:
    gr.Markdown("Five short steps through the paper's story. Each shows a **recorded example** at once; "
                "**Run it live** makes the same runs again on this machine and switches to *Watch live*.",
                elem_classes=[ADVANCED_CLASS])
    with gr.Row(equal_height=True):
        step = gr.Radio(TITLES, value=LESSONS[0].key, label="step", elem_id=STEP_ID, scale=4)
        with gr.Column(scale=1, min_width=220):
            with gr.Row():
                previous = gr.Button("◀ previous", size="sm", min_width=90, elem_id="lesson-previous")
                nxt = gr.Button("next ▶", size="sm", min_width=90, elem_id="lesson-next")
            live = gr.Button("Run it live", variant="primary", size="sm", elem_id=LIVE_ID)
    # the narration beside the figure: a step fits one 1280x720 screen (presenter view); on a narrower screen
    # (1280x720 at 150 % zoom is 853 px wide) the narration goes above and the figure gets the whole width
    with gr.Row(elem_id=BODY_ID):
        with gr.Column(scale=1, min_width=260):
            narration = gr.Markdown(elem_id=NARRATION_ID)
            message = gr.Markdown(elem_id="lesson-message")
        with gr.Column(scale=3):
            figure = gr.Plot(show_label=False, elem_id=FIGURE_ID)
            second = gr.Plot(show_label=False, elem_id=SECOND_ID, visible=False)
    return LessonsTab(step=step, narration=narration, figure=figure, second=second, previous=previous, next=nxt,
                      live=live, message=message)


def narration(item: Lesson, numbers: str) -> str:
    return f"### {item.title}\n\n{item.narration}\n\n**Look at** {item.look_at} (outlined).  \n*{numbers}*"


def show(key: str | None, presenter: bool = False) -> tuple:
    """The step's narration, figure(s) from its recording (`presenter`: restyled for a projector), and
    whether it can run live."""
    try:
        item = lesson(key or LESSONS[0].key)
    except ValueError as err:  # a name the step list does not hold (the API checks the choice first)
        return f"⚠️ {err}", None, gr.Plot(visible=False), gr.Button(visible=False)
    try:
        main, second, numbers = lesson_figures(item)
        if presenter:
            share = 1 if second is None else 2
            main, second = present(main, share=share), (present(second, share=share) if second is not None else None)
    except FileNotFoundError as err:  # a recording or the study's results are missing from this install
        return (f"### {item.title}\n\n{item.narration}\n\n⚠️ The recorded example is missing ({err}): "
                "press **Run it live**.", None, gr.Plot(visible=False), gr.Button(visible=item.live is not None))
    return (narration(item, numbers), main, gr.Plot(second, visible=second is not None),
            gr.Button(visible=item.live is not None))


def neighbour(key: str | None, offset: int) -> str:
    keys = [item.key for item in LESSONS]
    i = keys.index(key) if key in keys else 0
    return keys[min(len(keys) - 1, max(0, i + offset))]


def run_live(controller: EngineController, key: str | None) -> tuple[str, bool]:
    """Start the step's runs (the same form values as its recording); (message, started)."""
    try:
        item = lesson(key or LESSONS[0].key)
    except ValueError as err:
        return f"⚠️ {err}", False
    if item.live is None:
        return "This step shows the project's committed results: nothing to run here.", False
    form = item.live
    try:
        configs = configs_for(form, out_for=lambda m: str(controller.new_run_dir(m, form.stages)))
        tracked = controller.start(configs)
    except ConfigError as err:
        return f"⚠️ **Cannot start:** {render(err, FORM)}", False
    except (RuntimeError, ValueError) as err:
        return f"⚠️ {err}", False
    return f"Started {len(tracked)} run(s) of “{item.title}”, one after another.", True
