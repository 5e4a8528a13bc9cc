"""Watch live tab: status line, per-stage timeline and memory, live loss curves and eval accuracy,
per-stage table, status JSON, and the Inject failure panel's recovery line.

Everything that changes while a run goes is fetched and drawn by the page's own script
(page_script.js), not sent by Gradio events: every Gradio event costs the page a snapshot of each
component that ever showed a loading status, and a Gradio plot is re-mounted and drawn afresh on
every update. Every `--poll` (default 1 s) the script fetches `watch_line`: the status line, the
recovery line, the run's state key and its figures key. When the figures key (or the view) changed
since a part was drawn, and the part is on screen, it fetches `watch_figures` for the parts it
needs and redraws them with Plotly.react: at once when the state key changed (the first actions, a
failure, a recovery, the end), when a part comes into view or the user changed the view, else at
most every FIGURES_EVERY_S (or `--poll` if longer). Nothing is fetched while the tab is hidden, and
nothing is drawn while nothing changes. The live window holds at most LIVE_ACTIONS actions. What
watching costs is mostly the browser's work, and on a small machine the browser shares the cores
with the training it shows (docs/dashboard.md, "What watching costs"; `zerolock bench dashboard` measures it)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import gradio as gr

from ..controller import EngineController, failures
from ..failure_panel import build_failure_panel
from ..page.page_script import ADVANCED_CLASS, STATUS_ID, holder_box, line_box, line_html, status_box, table_html
from ..recovery_text import recovery_text
from ..figures.timebase import recent_window_s
from ..page.watch_parts import FAILURE, JUMP_ID, PARTS, PLOT_PARTS, RECENT, UNIT_ID, UNITS, WHOLE, WINDOW_ID, check_parts
from ..watch_view import TABLE_COLUMNS, status_markdown, title_of, watch_view
from zerolock_core.rundir.metrics import shown_accuracy

LIVE_SECONDS, LIVE_ACTIONS = 20.0, 300  # the live window: at most 20 s and about 300 actions (~10 steps at K=2)
IDLE_MD = "Nothing to watch yet: start a run on the **Run** tab, or open a saved one on the **Runs** tab."


@dataclass(kw_only=True)
class WatchTab:
    status_md: gr.HTML  # written by the page's script (watch_line)
    window: gr.Radio  # read by the page's script; also an output of Open / Resume (whole run, recent)
    unit: gr.Radio
    jump: gr.Button  # the page's script checks "around the last failure" in `window`
    recovery: gr.HTML  # the Inject failure panel's detect / restore / replay line, written by the script
    parts: dict[str, gr.HTML]  # watch_parts.PARTS: the holders the script draws into (watch_figures)


def _holder(part: str) -> gr.HTML:
    # js_on_load=None: Gradio's default script turns every click inside (a zoom box, a legend click) into
    # the component's click event; nothing listens to it here
    return gr.HTML(status_box() if part == "status" else holder_box(), elem_id=PARTS[part], js_on_load=None,
                   elem_classes=[ADVANCED_CLASS] if part == "status" else None)


def build_watch_tab(controller: EngineController) -> WatchTab:
    with gr.Row(equal_height=False):  # True stretched the jump button to the radio's height
        status_md = gr.HTML(line_box(IDLE_MD), elem_id=STATUS_ID)
        # interactive: no Python event reads them (the page's script does), which Gradio takes for "static"
        window = gr.Radio([RECENT, WHOLE, FAILURE], value=RECENT, label="timeline and memory show", scale=0,
                          min_width=300, elem_id=WINDOW_ID, interactive=True)
        jump = gr.Button("jump to the last failure", scale=0, min_width=120, size="sm", elem_id=JUMP_ID)
    recovery = build_failure_panel(controller)
    parts = {"timeline": _holder("timeline")}
    unit = gr.Radio(list(UNITS), value="MiB", label="memory in", elem_id=UNIT_ID, interactive=True)
    parts["memory"] = _holder("memory")
    with gr.Row():
        # side by side when there is room; one above the other on a narrow window (820 px)
        for part in ("training", "activity"):
            with gr.Column(min_width=460):
                parts[part] = _holder(part)
    parts["table"] = _holder("table")
    parts["status"] = _holder("status")
    return WatchTab(status_md=status_md, window=window, unit=unit, jump=jump, recovery=recovery, parts=parts)


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
    done = [b.metrics.wall_s + b.metrics.setup_s for b in batch[:i] if b.metrics and b.metrics.wall_s]
    eta = status.get("eta_s")
    if eta is None or t.engine_done:
        return words
    per_run = sum(done) / len(done) if done else (status.get("elapsed_s") or 0.0) + eta
    left = eta + per_run * (len(batch) - i - 1)
    minutes, seconds = divmod(int(round(left)), 60)
    return f"{words}, about {f'{minutes} min {seconds} s' if minutes else f'{seconds} s'} left in all"


def earlier_in_comparison(batch: list, t) -> str:
    """The runs of this comparison that came before the watched one, each with how it ended: Watch follows
    the newest run, and a lesson's "Run it live" once showed only 1F1B after ZeroLock had ended between
    two polls."""
    if len(batch) < 2 or t not in batch:
        return ""
    said = []
    for b in batch[:batch.index(t)]:
        m = b.metrics
        words = [str(b.state)]
        if m is not None and m.eval:
            what, value = shown_accuracy(m.eval)
            if value is not None:
                words.append(f"{what} {value:.3f}")
        if m is not None and m.throughput_samples_per_s:
            words.append(f"{m.throughput_samples_per_s:.1f} samples/s")
        said.append(f"{title_of(b)}: {', '.join(words)}")
    if not said:
        return ""
    return "before it in this comparison: " + "; ".join(said) + " (**Compare** shows them side by side)"


def _status(controller: EngineController, t) -> dict[str, Any]:
    batch = controller.batch()
    return {**t.status(), "busy": controller.busy, "batch_runs": [b.name for b in batch]}


class StateKey(NamedTuple):
    """What, when it changes, is drawn at once rather than at the figures' cadence."""

    run: str
    state: str
    acting: bool  # the first actions are in: the first bars come at once, not at the next cadence
    finished: bool  # the final metrics are in
    recovering: bool
    failures: int


class FiguresKey(NamedTuple):
    """What the figures are drawn from, whatever the view: the state, the actions and start-ups so far."""

    state: StateKey
    events: int
    startups: int  # lifecycle records: each stage's start-up phases


def state_key(t, status: dict[str, Any]) -> StateKey:
    return StateKey(run=t.name, state=t.state, acting=bool(t.events), finished=t.metrics is not None,
                    recovering=bool(status.get("open_recoveries")), failures=len(failures(status)))


def figures_key(t, status: dict[str, Any]) -> FiguresKey:
    return FiguresKey(state=state_key(t, status), events=len(t.events), startups=len(t.lifecycle))


def _as_text(key: NamedTuple) -> str:
    return "|".join(_as_text(v) if isinstance(v, tuple) else str(v) for v in key)


def watch_line(controller: EngineController) -> dict[str, Any]:
    """What the page's script fetches every --poll: the status line, the recovery line and the Inject
    panel's note on the run as HTML (no note while no run is watched: the panel's answer stays), the
    run's state key and its figures key as strings ("" while no run is watched: nothing to draw). The
    script calls the figures in when the figures key changed: at once when the state key did too,
    else at the figures' cadence."""
    t = controller.watched()
    if t is None:
        return {"status": line_html(IDLE_MD), "recovery": "", "key": "idle", "figures": ""}
    t.refresh()
    status = _status(controller, t)
    batch = controller.batch()
    position = comparison_position(batch, t, status)
    return {"status": line_html(status_markdown(t, status, position=position,
                                                earlier=earlier_in_comparison(batch, t))),
            "recovery": line_html(recovery_text(status)), "inject": line_html(t.inject_note),
            "key": _as_text(state_key(t, status)),
            "figures": _as_text(figures_key(t, status))}


def watch_figures(controller: EngineController, seen: dict[str, Any] | None, window_choice: str, unit: str,
                  parts: list[str]) -> dict[str, Any]:
    """What the page's script fetches to draw the Watch `parts` it needs (watch_parts.PARTS):
    {"parts": {part: a figure's JSON text | the table's HTML | the status dict}, "key": the figures
    key drawn from, "window": the window drawn, "seen": what the page sends back next time}.
    `seen` is the page's memory, kept by the page: the run it drew and how many of its failures. A
    failure the page has not drawn yet pins the view to it ("window" comes back FAILURE, and the
    script checks it in the radio) until the user picks another; so a failure missed while the tab
    was hidden is pinned when it shows again."""
    check_parts(parts)
    if window_choice not in (RECENT, WHOLE, FAILURE):
        raise ValueError(f"unknown window {window_choice!r}: choose from {[RECENT, WHOLE, FAILURE]}")
    if unit not in UNITS:
        raise ValueError(f"unknown memory unit {unit!r}: choose from {list(UNITS)}")
    t = controller.watched()
    if t is None:
        return {"parts": {}, "key": "", "window": window_choice, "seen": seen}
    t.refresh()
    status = _status(controller, t)
    n_failures = len(failures(status))
    seen = seen or {}
    if seen.get("run") == t.name and n_failures > seen.get("failures", 0):
        window_choice = FAILURE  # a new failure: show it, whatever the view was
    focus = window_choice == FAILURE and n_failures > 0
    window = None
    if window_choice == RECENT or (window_choice == FAILURE and not focus):
        window = recent_window_s(t.events, max_s=LIVE_SECONDS, max_events=LIVE_ACTIONS, stages=t.stages)
    v = watch_view(t, window_s=window, status=status, parts=parts, focus_failure=focus, measure=UNITS[unit])
    drawn: dict[str, Any] = {part: getattr(v, part).to_json() for part in PLOT_PARTS if part in parts}
    if "table" in parts:
        drawn["table"] = table_html(TABLE_COLUMNS, v.table, caption="per stage")
    if "status" in parts:
        drawn["status"] = v.status
    return {"parts": drawn, "key": _as_text(figures_key(t, status)), "window": window_choice,
            "seen": {"run": t.name, "failures": n_failures}}
