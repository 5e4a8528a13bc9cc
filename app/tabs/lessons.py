"""Lessons tab: the paper's story in six steps (app/lessons.py). Choosing a step shows its recorded
example at once (no typing, no waiting, offline); "Run it live" makes the same runs again and
switches to Watch live. Presenter view makes each step a slide that fits one screen."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from zerolock_core.config.field_words import FORM, ConfigError, render

from ..controller import EngineController
from ..form import configs_for
from ..figures.lessons import lesson_view, present
from ..lesson_questions import question_of, reveal_step
from ..lessons import LESSONS, Lesson, lesson
from ..page.page_script import ADVANCED_CLASS

STEP_ID, NARRATION_ID, FIGURE_ID, LIVE_ID = "lesson-step", "lesson-narration", "lesson-figure", "lesson-live"
CONTROLS_ID, TEXT_ID, COLUMNS_ID, SAY_ID = "lesson-controls", "lesson-text", "lesson-columns", "lesson-say"
QUESTION_ID = "lesson-question"
TITLES = [(item.title, item.key) for item in LESSONS]
# Presenter view: the step is a slide that fits one screen at any zoom (1280x720 at 100 % is 1280x720 CSS
# px; at 150 %, 853x480). Its step list gives way to previous / next (the title is beside the figure),
# everything above the figure is one short row each, and the figure and the text beside it take the
# height that is left: TOP_PX is where the figure starts in CSS px (the browser test measures it at both
# zooms). A <style> of this tab's own, not Gradio's `css`, which scopes a rule away from <body>.
TOP_PX = 150
PRESENTER_CSS = f"""<style>
body.zl-presenter #presenter-toggle {{ padding: 0 10px !important; }}
body.zl-presenter .form:has(> #presenter-toggle) {{ flex: 0 0 auto !important; width: max-content !important; }}
body.zl-presenter #presenter-toggle label {{ white-space: nowrap; }}
body.zl-presenter .form:has(> #{STEP_ID}), body.zl-presenter #{STEP_ID} {{ display: none !important; }}
body.zl-presenter #{CONTROLS_ID} {{ flex-direction: row !important; flex-wrap: nowrap !important; gap: 8px; }}
body.zl-presenter #{CONTROLS_ID} > * {{ flex: 1 1 0 !important; min-width: 0 !important; }}
body.zl-presenter #{COLUMNS_ID} {{ flex-wrap: nowrap !important; }}
body.zl-presenter #{FIGURE_ID} [data-testid=plotly] {{ height: calc(100vh - {TOP_PX}px) !important; }}
body.zl-presenter #{TEXT_ID} {{ max-height: calc(100vh - {TOP_PX}px); overflow-y: auto; }}
body.zl-presenter #{TEXT_ID} .prose {{ font-size: 16px; line-height: 1.3; }}
body.zl-presenter #{TEXT_ID} h3 {{ margin: 0 0 6px 0; }}
</style>"""
INTRO = ("Six short steps through the paper's story. Each shows a <b>recorded example</b> at once; <b>Run it "
         "live</b> makes the same runs again on this machine and switches to <i>Watch live</i>.")


@dataclass(kw_only=True)
class LessonsTab:
    step: gr.Radio
    narration: gr.Markdown  # the title, the headline and what to look at
    say: gr.Markdown  # the sentences to read aloud
    figure: gr.Plot
    previous: gr.Button
    next: gr.Button
    live: gr.Button
    message: gr.Markdown
    ask: gr.Accordion  # the step's predict-then-reveal question, collapsed to one row
    pick: gr.Radio
    answer: gr.Markdown

    @property
    def outputs(self) -> list[gr.components.Component]:
        return [self.narration, self.say, self.figure, self.live, self.ask, self.pick, self.answer]


def build_lessons_tab() -> LessonsTab:
    # the tab's style rides with its introduction (hidden in presenter view; a <style> applies all the same)
    gr.HTML(PRESENTER_CSS + INTRO, elem_classes=[ADVANCED_CLASS])
    with gr.Row(equal_height=True):
        step = gr.Radio(TITLES, value=LESSONS[0].key, label="step", elem_id=STEP_ID, scale=4)
        with gr.Column(scale=1, min_width=220, elem_id=CONTROLS_ID):
            with gr.Row():
                previous = gr.Button("◀ previous", size="sm", min_width=90, elem_id="lesson-previous")
                nxt = gr.Button("next ▶", size="sm", min_width=90, elem_id="lesson-next")
            live = gr.Button("Run it live", variant="primary", size="sm", elem_id=LIVE_ID)
    # the text beside the figure, its headline first: the step's point is on screen without scrolling
    with gr.Row(elem_id=COLUMNS_ID):
        with gr.Column(scale=1, min_width=260, elem_id=TEXT_ID):
            # predict, then reveal: first in the column, one collapsed row until opened (the step still fits)
            first = question_of(LESSONS[0].key)
            with gr.Accordion(asked(first.prompt), open=False, elem_id=QUESTION_ID) as ask:
                pick = gr.Radio(list(first.choices), value=None, show_label=False, elem_id=f"{QUESTION_ID}-pick")
                reveal = gr.Button("Reveal", size="sm", elem_id=f"{QUESTION_ID}-reveal")
                answer = gr.Markdown(elem_id=f"{QUESTION_ID}-answer")
            narration = gr.Markdown(elem_id=NARRATION_ID)
            say = gr.Markdown(elem_id=SAY_ID)
            message = gr.Markdown(elem_id="lesson-message")
        with gr.Column(scale=3):
            figure = gr.Plot(show_label=False, elem_id=FIGURE_ID)
    reveal.click(reveal_step, [step, pick], answer, show_progress="hidden")
    return LessonsTab(step=step, narration=narration, say=say, figure=figure, previous=previous, next=nxt, live=live,
                      message=message, ask=ask, pick=pick, answer=answer)


def asked(prompt: str) -> str:
    return f"Predict first: {prompt}"


def question_row(key: str | None) -> tuple:
    """The step's question, collapsed, nothing picked, nothing revealed."""
    q = question_of(key)
    return gr.Accordion(label=asked(q.prompt), open=False), gr.Radio(choices=list(q.choices), value=None), ""


def narration(item: Lesson, headline: str) -> str:
    """The title, the one headline and what to look at: the step's point, first in the column."""
    return f"### {item.title}\n\n{headline}\n\n**Look at** {item.look_at}."


def show(key: str | None, presenter: bool = False) -> tuple:
    """The step's title, headline and what to look at; its sentences to read aloud; its figure from its
    recording (`presenter`: restyled for a projector); and whether it can run live."""
    try:
        item = lesson(key or LESSONS[0].key)
    except ValueError as err:  # a name the step list does not hold (the API checks the choice first)
        return f"⚠️ {err}", "", None, gr.Button(visible=False), gr.skip(), gr.skip(), gr.skip()
    try:
        view = lesson_view(item)
    except FileNotFoundError as err:  # a recording or the study's results are missing from this install
        return (f"### {item.title}\n\n⚠️ The recorded example is missing ({err}): press **Run it live**.",
                item.narration, None, gr.Button(visible=bool(item.live)), *question_row(item.key))
    figure = present(view.figure) if presenter else view.figure
    return (narration(item, view.headline), item.narration, figure, gr.Button(visible=bool(item.live)),
            *question_row(item.key))


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
    if not item.live:
        return "This step shows the project's committed results: nothing to run here.", False
    taken: list[str] = []

    def out_for(method: str, stages: int) -> str:
        """A fresh directory per run: two runs of one method (two readouts) in one second get -2."""
        base = path = controller.new_run_dir(method, stages)
        n = 1
        while str(path) in taken or path.exists():
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        taken.append(str(path))
        return str(path)

    try:
        configs = [cfg for form in item.live
                   for cfg in configs_for(form, out_for=lambda m, k=form.stages: out_for(m, k))]
        tracked = controller.start(configs)
    except ConfigError as err:
        return f"⚠️ **Cannot start:** {render(err, FORM)}", False
    except (RuntimeError, ValueError) as err:
        return f"⚠️ {err}", False
    return f"Started {len(tracked)} run(s) of “{item.title}”, one after another.", True
