"""What the Watch tab is sent: the figures nothing while the tab is hidden, and only when something
changed; the status line (fetched by the page's script) with a state key that changes with the run's
state, not with its progress; and a failure missed while hidden pins the view when the tab shows again."""
from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr

from app import tab_watch
from app.controller import Tracked
from zerolock_core.config import RunConfig, TrainConfig

CFG = RunConfig(train=TrainConfig(runtime="pipeline", stages=2, steps=50)).to_dict()
SKIP = gr.skip()
FAILURE = {"stage": 1, "mode": "kill", "kind": "local", "detect_s": 0.1, "restore_s": 2.0, "replay_s": 0.1,
           "replayed_microbatches": 1, "bytes_transferred": 0, "t_fail_ns": 3_000_000, "t_detect_ns": 3_100_000,
           "t_restored_ns": 4_000_000, "t_end_ns": 4_100_000, "open": False}
FIGURES = {name: i for i, name in enumerate(["timeline", "memory", "training", "activity", "table", "status_json",
                                             "window", "figures_timer", "drawn"])}


def events(n: int) -> list[dict]:
    return [{"stage": i % 2, "kind": "F", "mb": i, "t0": i * 10**6, "t1": i * 10**6 + 5 * 10**5, "act_bytes": 0,
             "inflight": 1, "sent": 0, "recv": 0, "step": i // 8, "gen": 0} for i in range(n)]


@dataclass(kw_only=True)
class OneRun:
    """The three things poll() asks of the EngineController, for a run whose data the test sets."""
    run: Tracked | None
    busy: bool = True
    batch_runs: list = field(default_factory=list)

    def watched(self) -> Tracked:
        return self.run

    def batch(self) -> list:
        return self.batch_runs


def reopened(tmp_path, **kw) -> OneRun:
    # a reopened run (engine None) with state "running": its status comes from what the test sets
    return OneRun(run=Tracked(name="r", dir=tmp_path, cfg=CFG, method="zerolock", batch="", state="running",
                              events=events(16), **kw))


def sent(out: tuple, name: str) -> bool:
    return out[FIGURES[name]] != SKIP


def test_a_hidden_watch_tab_is_sent_nothing_and_keeps_what_it_drew(tmp_path):
    ctl = reopened(tmp_path)
    drawn = {"key": None, "failures": 0, "run": None}
    figures = tab_watch.poll_figures(ctl, drawn, tab_watch.RECENT, visible=False)
    assert not any(sent(figures, name) for name in list(FIGURES)[:7]) and figures[FIGURES["drawn"]] is drawn


def test_the_figures_are_drawn_when_the_events_grow_and_skipped_when_nothing_changed(tmp_path):
    ctl = reopened(tmp_path)
    first = tab_watch.poll_figures(ctl, None, tab_watch.RECENT)
    assert all(sent(first, name) for name in ("timeline", "memory", "training", "activity", "table"))
    same = tab_watch.poll_figures(ctl, first[FIGURES["drawn"]], tab_watch.RECENT)
    assert not any(sent(same, name) for name in list(FIGURES)[:7])
    ctl.run.events.extend(events(24)[16:])
    grown = tab_watch.poll_figures(ctl, same[FIGURES["drawn"]], tab_watch.RECENT)
    assert sent(grown, "timeline") and sent(grown, "memory") and sent(grown, "table")


def test_the_activity_bars_are_sent_only_when_their_whole_percents_change(tmp_path):
    ctl = reopened(tmp_path)
    ctl.run.events[:] = events(200)  # each stage computes 0.5 ms of every 2 ms: 25 %
    first = tab_watch.poll_figures(ctl, None, tab_watch.RECENT)
    ctl.run.events.extend(events(240)[200:])  # the same rhythm: still 25 % (25.2 % before, 25.2 % now)
    steady = tab_watch.poll_figures(ctl, first[FIGURES["drawn"]], tab_watch.RECENT)
    assert sent(steady, "timeline") and not sent(steady, "activity")
    busy = [{**e, "t0": e["t0"] - 10**6, "t1": e["t0"] + 10**6} for e in events(400)[240:]]  # now always busy
    ctl.run.events.extend(busy)
    changed = tab_watch.poll_figures(ctl, steady[FIGURES["drawn"]], tab_watch.RECENT)
    assert sent(changed, "activity")


def test_the_status_line_key_changes_with_the_state_not_with_the_progress(tmp_path):
    ctl = reopened(tmp_path)
    first = tab_watch.watch_line(ctl)
    assert "<strong>ZeroLock" in first["status"] and first["recovery"] == ""
    ctl.run.events.extend(events(24)[16:])  # more actions, same state: the figures' own cadence
    second = tab_watch.watch_line(ctl)
    assert second["key"] == first["key"]
    ctl.run.state = "recovering"
    assert tab_watch.watch_line(ctl)["key"] != first["key"]  # the script calls the figures in at once


def test_the_status_line_without_a_watched_run_says_how_to_start_one():
    line = tab_watch.watch_line(OneRun(run=None, busy=False))
    assert "Run" in line["status"] and line["key"] == "idle" and line["recovery"] == ""


def test_a_failure_missed_while_hidden_pins_the_view_when_the_tab_shows_again(tmp_path):
    ctl = reopened(tmp_path)
    drawn = tab_watch.poll_figures(ctl, None, tab_watch.RECENT)[FIGURES["drawn"]]
    ctl.run.metrics = {"recovery": [FAILURE]}  # the failure happens while the user is on another tab
    hidden = tab_watch.poll_figures(ctl, drawn, tab_watch.RECENT, visible=False)
    assert not sent(hidden, "window")
    assert tab_watch.watch_line(ctl)["recovery"].startswith("<p>stage 1 kill → local recovery")
    shown = tab_watch.poll_figures(ctl, hidden[FIGURES["drawn"]], tab_watch.RECENT)
    assert shown[FIGURES["window"]] == tab_watch.FAILURE and sent(shown, "timeline")
