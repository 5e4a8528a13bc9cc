"""Watch live tab: status line, per-stage timeline and memory, live loss curves and eval accuracy,
per-stage table, and the Inject failure panel's recovery line.

A gr.Timer ticks at most twice a second (`--poll`, default 1 s). Each tick updates the status line;
the figures are redrawn only when something changed and at most once every FIGURES_EVERY_S, and
the live window holds at most LIVE_ACTIONS actions: what watching costs is mostly the browser's
redraws, and on a small machine it shares the cores with the training (README, "The dashboard")."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import gradio as gr

from .controller import EngineController
from .failure_panel import build_failure_panel, watched_recovery_line
from .timebase import recent_window_s
from .watch_view import TABLE_COLUMNS, status_markdown, watch_view

RECENT, WHOLE = "recent actions", "whole run"
LIVE_SECONDS, LIVE_ACTIONS = 20.0, 300  # the live window: at most 20 s and about 300 actions (~10 steps at K=2)
FIGURES_EVERY_S = 2.0
IDLE_MD = "Nothing to watch yet: start a run on the **Run** tab, or open a saved one on the **Runs** tab."


@dataclass(kw_only=True)
class WatchTab:
    status_md: gr.Markdown
    window: gr.Radio
    timeline: gr.Plot
    memory: gr.Plot
    training: gr.Plot
    activity: gr.Plot
    table: gr.Dataframe
    status_json: gr.JSON
    recovery: gr.Markdown  # the Inject failure panel's detect / restore / replay line

    @property
    def outputs(self) -> list[gr.components.Component]:
        return [self.status_md, self.timeline, self.memory, self.training, self.activity, self.table,
                self.status_json, self.recovery]


def build_watch_tab(controller: EngineController) -> WatchTab:
    with gr.Row(equal_height=True):
        status_md = gr.Markdown(IDLE_MD, elem_id="watch-status")
        window = gr.Radio([RECENT, WHOLE], value=RECENT, label="timeline and memory show", scale=0,
                          min_width=260, elem_id="watch-window")
    recovery = build_failure_panel(controller)
    timeline = gr.Plot(show_label=False, elem_id="timeline")
    memory = gr.Plot(show_label=False, elem_id="memory")
    with gr.Row():
        training = gr.Plot(show_label=False, elem_id="training")
        activity = gr.Plot(show_label=False, elem_id="activity")
    table = gr.Dataframe(headers=TABLE_COLUMNS, label="per stage", interactive=False, elem_id="stage-table")
    with gr.Accordion("status (JSON)", open=False):
        status_json = gr.JSON(elem_id="status-json")
    return WatchTab(status_md=status_md, window=window, timeline=timeline, memory=memory, training=training,
                    activity=activity, table=table, status_json=status_json, recovery=recovery)


def watched_status(controller: EngineController) -> dict[str, Any]:
    """The run being watched, as plain data (also the `/status` API endpoint)."""
    t = controller.watched()
    if t is None:
        return {"state": "idle", "busy": controller.busy}
    t.refresh()
    batch = controller.batch()
    return {**t.status(), "busy": controller.busy, "batch_runs": [b.name for b in batch],
            "batch_states": [b.state for b in batch]}


def poll(controller: EngineController, drawn: dict | None, window_choice: str) -> tuple:
    """One tick: the status line always (elapsed time moves); the figures when the run's events or
    state changed, at most once every FIGURES_EVERY_S unless the state changed; the timer's next state;
    and what this browser session has drawn (`drawn`, a gr.State)."""
    t = controller.watched()
    if t is None:
        return (*[gr.skip()] * 8, gr.Timer(active=controller.busy), drawn)
    t.refresh()
    keep_polling = controller.busy or not t.engine_done
    last = drawn or {"key": None, "at": 0.0, "recovery": None}
    line = watched_recovery_line(controller)
    recovery = gr.skip() if line == last.get("recovery") else line  # every update costs the browser a redraw
    batch = controller.batch()
    position = f"run {batch.index(t) + 1} of {len(batch)} in this comparison" if len(batch) > 1 and t in batch else ""
    status = {**t.status(), "busy": controller.busy, "batch_runs": [b.name for b in batch]}
    key = (t.name, len(t.events), t.state, t.metrics is not None, window_choice)
    now = time.monotonic()
    same_run_and_state = last["key"] is not None and last["key"][0] == t.name and last["key"][2:] == key[2:]
    if key == last["key"] or (same_run_and_state and now - last["at"] < FIGURES_EVERY_S):
        return (status_markdown(t, status, position=position), *[gr.skip()] * 6, recovery,
                gr.Timer(active=keep_polling), {**last, "recovery": line})
    window = None
    if window_choice != WHOLE:
        window = recent_window_s(t.events, max_s=LIVE_SECONDS, max_events=LIVE_ACTIONS)
    first_draw = last["key"] is None or last["key"][0] != t.name or last["key"][3] != key[3]
    live_losses = t.metrics is None and t.runtime == "pipeline"  # the curves grow with the events
    v = watch_view(t, window_s=window, position=position, status=status, with_training=first_draw or live_losses)
    return (v.status_md, v.timeline, v.memory, v.training if v.training is not None else gr.skip(), v.activity,
            v.table, v.status, recovery, gr.Timer(active=keep_polling), {"key": key, "at": now, "recovery": line})
