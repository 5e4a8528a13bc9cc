"""Watch live tab: status line, per-stage timeline and memory, live loss curves and eval accuracy,
per-stage table, and the Inject failure panel's recovery line.

The status line and the recovery line are fetched by the page's own script every `--poll` (default
1 s) from the `watch_line` endpoint, not sent by a Gradio event: every Gradio event costs the page a
snapshot of each component that ever showed a loading status (page_script.js). The figures timer
(FIGURES_EVERY_S, or `--poll` if longer) redraws the figures, the table and the status JSON when the
run's events changed. A change of the run's state key (a failure, a recovery, the end) makes the
script press the hidden "draw-figures" button, so the figures come at once, and so does the user
changing the view. Nothing is sent while this session's Watch tab is hidden, and the live window
holds at most LIVE_ACTIONS actions. What watching costs is mostly the browser's work, and on a small
machine the browser shares the cores with the training it shows (README, "The dashboard"; `zerolock
bench dashboard` measures it)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import gradio as gr

from .controller import EngineController, failures
from .failure_panel import build_failure_panel
from .page_script import DRAW_ID, HIDDEN_CLASS, STATUS_ID, line_box, line_html
from .recovery_text import recovery_text
from .timebase import recent_window_s
from .watch_view import TABLE_COLUMNS, status_markdown, watch_view

RECENT, WHOLE, FAILURE = "recent actions", "whole run", "around the last failure"
UNITS = {"MiB": "act_bytes", "micro-batches held": "inflight"}  # memory chart: label -> event field
LIVE_SECONDS, LIVE_ACTIONS = 20.0, 300  # the live window: at most 20 s and about 300 actions (~10 steps at K=2)
FIGURES_EVERY_S = 5.0  # measured: 2 s cost the browser ~55 % of a core, 5-6 s ~33 %, never ~29 %
IDLE_MD = "Nothing to watch yet: start a run on the **Run** tab, or open a saved one on the **Runs** tab."


@dataclass(kw_only=True)
class WatchTab:
    status_md: gr.HTML  # written by the page's script (watch_line)
    window: gr.Radio  # also an output: a new failure pins the view to it
    unit: gr.Radio
    jump: gr.Button
    timeline: gr.Plot
    memory: gr.Plot
    training: gr.Plot
    activity: gr.Plot
    table: gr.Dataframe
    status_json: gr.JSON
    recovery: gr.HTML  # the Inject failure panel's detect / restore / replay line, written by the script
    draw: gr.Button  # hidden: the script presses it when the run's state key changes

    @property
    def figure_outputs(self) -> list[gr.components.Component]:
        return [self.timeline, self.memory, self.training, self.activity, self.table, self.status_json, self.window]

    @property
    def inputs(self) -> list[gr.components.Component]:
        return [self.window, self.unit]


def build_watch_tab(controller: EngineController) -> WatchTab:
    with gr.Row(equal_height=False):  # True stretched the jump button to the radio's height
        status_md = gr.HTML(line_box(IDLE_MD), elem_id=STATUS_ID)
        window = gr.Radio([RECENT, WHOLE, FAILURE], value=RECENT, label="timeline and memory show", scale=0,
                          min_width=300, elem_id="watch-window")
        jump = gr.Button("jump to the last failure", scale=0, min_width=120, size="sm", elem_id="jump-to-failure")
    recovery = build_failure_panel(controller)
    draw = gr.Button("draw the figures now", elem_id=DRAW_ID, elem_classes=[HIDDEN_CLASS])
    timeline = gr.Plot(show_label=False, elem_id="timeline")
    unit = gr.Radio(list(UNITS), value="MiB", label="memory in", elem_id="memory-unit")
    memory = gr.Plot(show_label=False, elem_id="memory")
    with gr.Row():
        # side by side when there is room; one above the other on a narrow window (820 px)
        training = gr.Plot(show_label=False, elem_id="training", min_width=460)
        activity = gr.Plot(show_label=False, elem_id="activity", min_width=460)
    table = gr.Dataframe(headers=TABLE_COLUMNS, label="per stage", interactive=False, elem_id="stage-table")
    with gr.Accordion("status (JSON)", open=False):
        status_json = gr.JSON(elem_id="status-json")
    return WatchTab(status_md=status_md, window=window, unit=unit, jump=jump, timeline=timeline, memory=memory,
                    training=training,
                    activity=activity, table=table, status_json=status_json, recovery=recovery,
                    draw=draw)


def watched_status(controller: EngineController) -> dict[str, Any]:
    """The run being watched, as plain data (also the `/status` API endpoint)."""
    t = controller.watched()
    if t is None:
        return {"state": "idle", "busy": controller.busy}
    t.refresh()
    batch = controller.batch()
    return {**t.status(), "busy": controller.busy, "batch_runs": [b.name for b in batch],
            "batch_states": [b.state for b in batch]}


def comparison_position(batch: list, t, status: dict[str, Any]) -> str:
    """"run 2 of 3 in this comparison, about 1 min 40 s left": the runs still to come are guessed to
    take as long as the ones that finished (or, before any has, as long as this one will)."""
    if len(batch) < 2 or t not in batch:
        return ""
    i = batch.index(t)
    words = f"run {i + 1} of {len(batch)} in this comparison"
    done = [b.metrics["wall_s"] + b.metrics.get("setup_s", 0.0) for b in batch[:i]
            if b.metrics and "wall_s" in b.metrics]
    eta = status.get("eta_s")
    if eta is None or t.engine_done:
        return words
    per_run = sum(done) / len(done) if done else (status.get("elapsed_s") or 0.0) + eta
    left = eta + per_run * (len(batch) - i - 1)
    minutes, seconds = divmod(int(round(left)), 60)
    return f"{words}, about {f'{minutes} min {seconds} s' if minutes else f'{seconds} s'} left in all"


def _status(controller: EngineController, t) -> dict[str, Any]:
    batch = controller.batch()
    return {**t.status(), "busy": controller.busy, "batch_runs": [b.name for b in batch]}


class StateKey(NamedTuple):
    """What, when it changes, is drawn at once rather than at the figures' cadence."""

    run: str
    state: str
    finished: bool  # the final metrics are in
    recovering: bool
    failures: int


class DrawnKey(NamedTuple):
    """What a browser session's figures were drawn from: nothing is redrawn while it stays the same."""

    events: int
    state: StateKey
    window: str
    unit: str


def state_key(t, status: dict[str, Any]) -> StateKey:
    return StateKey(run=t.name, state=t.state, finished=t.metrics is not None,
                    recovering=bool(status.get("open_recoveries")), failures=len(failures(status)))


def watch_line(controller: EngineController) -> dict[str, Any]:
    """What the page's script fetches every --poll: the status line and the recovery line as HTML, and
    the run's state key (StateKey as a string: when it changes the script calls the figures in)."""
    t = controller.watched()
    if t is None:
        return {"status": line_html(IDLE_MD), "recovery": "", "key": "idle"}
    t.refresh()
    status = _status(controller, t)
    position = comparison_position(controller.batch(), t, status)
    return {"status": line_html(status_markdown(t, status, position=position)),
            "recovery": line_html(recovery_text(status)), "key": "|".join(map(str, state_key(t, status)))}


def poll_figures(controller: EngineController, drawn: dict | None, window_choice: str, unit: str = "MiB", *,
                 visible: bool = True, every_s: float = FIGURES_EVERY_S) -> tuple:
    """One figures tick: (timeline, memory, training, activity, table, status JSON, window radio,
    figures timer, `drawn`), the figures only when the run's events, its state or the view changed
    since what this browser session drew (`drawn`, a gr.State). A failure this session has not seen
    yet pins the view to it (the window radio switches to FAILURE) until the user picks another.
    While the Watch tab is hidden (`visible` False) nothing is sent: what was missed, a failure
    included, is drawn on the first tick after it shows again. The timer goes back to `every_s`."""
    skip_all = [gr.skip()] * 7
    t = controller.watched()
    if t is None:
        return (*skip_all, gr.Timer(every_s, active=controller.busy), drawn)
    t.refresh()
    timer = gr.Timer(every_s, active=controller.busy or not t.engine_done)
    if not visible:
        return (*skip_all, timer, drawn)
    last = drawn or {"key": None, "failures": 0, "run": None}
    status = _status(controller, t)
    n_failures = len(failures(status))
    pin = gr.skip()
    if last.get("run") == t.name and n_failures > last.get("failures", 0):
        window_choice, pin = FAILURE, FAILURE  # a new failure: show it, whatever the view was
    last = {**last, "failures": n_failures, "run": t.name}
    key = DrawnKey(events=len(t.events), state=state_key(t, status), window=window_choice, unit=unit)
    if key == last["key"]:
        return (*skip_all[:6], pin, timer, last)
    focus = window_choice == FAILURE and n_failures > 0
    window = None
    if window_choice == RECENT or (window_choice == FAILURE and not focus):
        window = recent_window_s(t.events, max_s=LIVE_SECONDS, max_events=LIVE_ACTIONS)
    before: DrawnKey | None = last["key"]
    first_draw = before is None or before.state.run != t.name or before.state.finished != key.state.finished
    live_losses = t.metrics is None and t.runtime == "pipeline"  # the curves grow with the events
    v = watch_view(t, window_s=window, status=status, with_training=first_draw or live_losses, focus_failure=focus,
                   measure=UNITS.get(unit, "act_bytes"))
    # the activity bars are the run's cumulative shares in whole percent: mid-run most ticks leave them
    # as drawn, and a plot update costs the browser ~2 % of a core here even when nothing in it moved
    activity = v.activity.to_json()
    same_activity = not first_draw and activity == last.get("activity")
    return (v.timeline, v.memory, v.training if v.training is not None else gr.skip(),
            gr.skip() if same_activity else v.activity, v.table, v.status, pin, timer,
            {**last, "key": key, "activity": activity})
