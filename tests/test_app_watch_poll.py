"""What one Watch tick sends: nothing while the tab is hidden, the status line every tick, the figures at
once when the run's state changes and otherwise at most every FIGURES_EVERY_S, and a failure missed
while hidden pins the view when the tab shows again."""
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
OUT = {name: i for i, name in enumerate(["status_md", "timeline", "memory", "training", "activity", "table",
                                         "status_json", "recovery", "window", "timer", "drawn"])}


def events(n: int) -> list[dict]:
    return [{"stage": i % 2, "kind": "F", "mb": i, "t0": i * 10**6, "t1": i * 10**6 + 5 * 10**5, "act_bytes": 0,
             "inflight": 1, "sent": 0, "recv": 0, "step": i // 8, "gen": 0} for i in range(n)]


@dataclass(kw_only=True)
class OneRun:
    """The three things poll() asks of the EngineController, for a run whose data the test sets."""
    run: Tracked
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
    return out[OUT[name]] != SKIP


def test_a_hidden_watch_tab_is_sent_nothing_and_keeps_what_it_drew(tmp_path):
    ctl = reopened(tmp_path)
    drawn = {"key": None, "at": 0.0, "recovery": None, "failures": 0, "run": None}
    out = tab_watch.poll(ctl, drawn, tab_watch.RECENT, visible=False)
    assert not any(sent(out, name) for name in list(OUT)[:9])
    assert out[OUT["drawn"]] is drawn


def test_the_status_line_goes_every_tick_and_the_figures_wait_unless_the_state_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(tab_watch, "FIGURES_EVERY_S", 1e9)  # "within the interval" whatever the machine's speed
    ctl = reopened(tmp_path)
    first = tab_watch.poll(ctl, None, tab_watch.RECENT)
    assert sent(first, "status_md") and sent(first, "timeline") and sent(first, "memory")
    ctl.run.events.extend(events(24)[16:])  # more actions, same state
    second = tab_watch.poll(ctl, first[OUT["drawn"]], tab_watch.RECENT)
    assert sent(second, "status_md") and not sent(second, "timeline") and not sent(second, "table")
    ctl.run.state = "recovering"  # a state change is drawn at once
    third = tab_watch.poll(ctl, second[OUT["drawn"]], tab_watch.RECENT)
    assert sent(third, "timeline") and sent(third, "memory") and sent(third, "table")


def test_a_failure_missed_while_hidden_pins_the_view_when_the_tab_shows_again(tmp_path):
    ctl = reopened(tmp_path)
    drawn = tab_watch.poll(ctl, None, tab_watch.RECENT)[OUT["drawn"]]
    ctl.run.metrics = {"recovery": [FAILURE]}  # the failure happens while the user is on another tab
    hidden = tab_watch.poll(ctl, drawn, tab_watch.RECENT, visible=False)
    assert not sent(hidden, "window")
    shown = tab_watch.poll(ctl, hidden[OUT["drawn"]], tab_watch.RECENT)
    assert shown[OUT["window"]] == tab_watch.FAILURE and sent(shown, "timeline")
    assert shown[OUT["recovery"]].startswith("stage 1 kill → local recovery")
