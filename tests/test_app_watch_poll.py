"""What the page's script is sent for the Watch tab: the status line with a state key that changes
with the run's state, not with its progress, and a figures key that changes with both (the script
redraws nothing while it stays the same); the parts it asks for, and only those; and a failure the
page has not drawn yet pins the view, also when it happened while the tab was hidden."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import plotly.graph_objects as go
import pytest

from zerolock_core.rundir.metrics import Metrics
from zerolock_core.rundir.run_dir import RunDir
from app.tabs import watch as tab_watch
from app.controller import Tracked
from app.page.watch_parts import FAILURE, PARTS, PLOT_PARTS, RECENT, WHOLE
from zerolock_core.config.run_config import RunConfig, TrainConfig

CFG = RunConfig(train=TrainConfig(runtime="pipeline", stages=2, steps=50)).to_dict()
RECORD = {"stage": 1, "mode": "kill", "kind": "local", "detect_s": 0.1, "restart_s": 1.99, "restore_s": 0.005,
          "relink_s": 0.005, "replay_s": 0.1,
          "replayed_microbatches": 1, "bytes_transferred": 0, "t_fail_ns": 3_000_000, "t_detect_ns": 3_100_000,
          "t_restored_ns": 4_000_000, "t_end_ns": 4_100_000, "open": False}


def events(n: int) -> list[dict]:
    return [{"stage": i % 2, "kind": "F", "mb": i, "t0": i * 10**6, "t1": i * 10**6 + 5 * 10**5, "act_bytes": 0,
             "inflight": 1, "sent": 0, "recv": 0, "step": i // 8, "gen": 0} for i in range(n)]


@dataclass(kw_only=True)
class OneRun:
    """The three things the Watch tab asks of the EngineController, for a run whose data the test sets."""
    run: Tracked | None
    busy: bool = True
    batch_runs: list = field(default_factory=list)

    def watched(self) -> Tracked:
        return self.run

    def batch(self) -> list:
        return self.batch_runs


def reopened(tmp_path, **kw) -> OneRun:
    # a reopened run (engine None) with state "running": its status comes from what the test sets
    return OneRun(run=Tracked(name="r", rd=RunDir(tmp_path), cfg=CFG, method="zerolock", batch="", state="running",
                              events=events(16), **kw))


def figures(ctl: OneRun, parts: list[str], *, seen: dict | None = None, window: str = RECENT,
            unit: str = "MiB") -> dict:
    return tab_watch.watch_figures(ctl, seen, window, unit, parts)


@pytest.mark.parametrize("parts", [["timeline"], ["memory", "table"], ["training", "activity", "status"],
                                   list(PARTS), []])
def test_only_the_parts_asked_for_are_sent(tmp_path, parts):
    answer = figures(reopened(tmp_path), parts)
    assert sorted(answer["parts"]) == sorted(parts)
    for part in set(parts) & set(PLOT_PARTS):
        go.Figure(json.loads(answer["parts"][part]))  # a valid plotly figure
    if "table" in parts:
        assert answer["parts"]["table"].startswith('<table class="zerolock-table">') and "<td>0–3</td>" in \
            answer["parts"]["table"]
    if "status" in parts:
        assert answer["parts"]["status"]["name"] == "r"


@pytest.mark.parametrize("parts, window, unit, message", [
    (["timeline", "loss"], RECENT, "MiB", "unknown Watch part"),
    (["timeline"], "last minute", "MiB", "unknown window"),
    (["memory"], RECENT, "GiB", "unknown memory unit"),
])
def test_a_bad_request_is_refused_in_words(tmp_path, parts, window, unit, message):
    with pytest.raises(ValueError, match=message):
        figures(reopened(tmp_path), parts, window=window, unit=unit)


def test_the_answer_names_the_figures_key_it_was_drawn_from_as_the_status_line_does(tmp_path):
    ctl = reopened(tmp_path)
    assert figures(ctl, ["timeline"])["key"] == tab_watch.watch_line(ctl)["figures"]


def test_without_a_watched_run_nothing_is_drawn():
    answer = figures(OneRun(run=None, busy=False), list(PARTS), seen={"run": "x", "failures": 0})
    assert answer == {"parts": {}, "key": "", "window": RECENT, "seen": {"run": "x", "failures": 0}}


def test_the_state_key_changes_with_the_state_and_the_figures_key_with_the_progress_too(tmp_path):
    ctl = reopened(tmp_path)
    first = tab_watch.watch_line(ctl)
    assert "<strong>ZeroLock" in first["status"] and first["recovery"] == ""
    ctl.run.events.extend(events(24)[16:])  # more actions, same state: the figures' own cadence
    second = tab_watch.watch_line(ctl)
    assert second["key"] == first["key"] and second["figures"] != first["figures"]
    ctl.run.lifecycle.append({"stage": 0, "gen": 1})  # a restarted stage's start-up record
    third = tab_watch.watch_line(ctl)
    assert third["key"] == second["key"] and third["figures"] != second["figures"]
    ctl.run.state = "recovering"
    assert tab_watch.watch_line(ctl)["key"] != first["key"]  # the script calls the figures in at once
    assert tab_watch.watch_line(ctl)["figures"] == tab_watch.watch_line(ctl)["figures"]  # nothing new: no draw


def test_the_first_actions_change_the_state_key_so_the_first_bars_come_at_once(tmp_path):
    ctl = reopened(tmp_path)
    ctl.run.events.clear()
    starting = tab_watch.watch_line(ctl)
    ctl.run.events.extend(events(2))
    assert tab_watch.watch_line(ctl)["key"] != starting["key"]


def test_the_status_line_without_a_watched_run_says_how_to_start_one_and_has_nothing_to_draw():
    line = tab_watch.watch_line(OneRun(run=None, busy=False))
    assert "Run" in line["status"] and line["key"] == "idle" and line["recovery"] == ""
    assert line["figures"] == ""  # the script calls no draw


# the page's memory before the failure -> the window it asked for -> the window drawn
@pytest.mark.parametrize("seen, asked, drawn", [
    ({"run": "r", "failures": 0}, RECENT, FAILURE),  # a failure the page has not drawn: pinned
    ({"run": "r", "failures": 0}, WHOLE, FAILURE),
    ({"run": "r", "failures": 1}, RECENT, RECENT),  # drawn before: the user's choice stands
    ({"run": "other", "failures": 0}, RECENT, RECENT),  # a run the page had not drawn: opens as asked
    (None, WHOLE, WHOLE),  # the page's first draw (a reopened run shows its whole story)
])
def test_a_failure_the_page_has_not_drawn_pins_the_view(tmp_path, seen, asked, drawn):
    ctl = reopened(tmp_path)
    ctl.run.metrics = Metrics.from_json({"recovery": [RECORD]})  # e.g. while the user was on another tab: nothing was fetched
    answer = figures(ctl, ["timeline"], seen=seen, window=asked)
    assert answer["window"] == drawn and answer["seen"] == {"run": "r", "failures": 1}
    title = json.loads(answer["parts"]["timeline"])["layout"]["title"]["text"]
    assert ("around stage 1's failure" in title) == (drawn == FAILURE)
    assert tab_watch.watch_line(ctl)["recovery"].startswith("<p>stage 1 kill → local recovery")
