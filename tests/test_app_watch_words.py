"""What the Watch tab says in words: the state line during start-up, an outage and the final eval;
the recovery line of a live or reopened run; the Runs table's rows."""
from __future__ import annotations

import json
import re

import pytest

from zerolock_core.rundir.metrics import Metrics
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.rundir.runs_root import RunsRoot
from app.controller import Tracked, failures
from app.recovery_text import recovery_text
from app.runs_index import COLUMNS, runs_table
from app.watch_view import state_words, status_markdown
from zerolock_core.config.run_config import RunConfig, TrainConfig

CFG = RunConfig(train=TrainConfig(runtime="pipeline", stages=2, steps=50, ckpt_every=2)).to_dict()
CLOSED = {"stage": 1, "mode": "kill", "kind": "local", "detect_s": 0.154, "restart_s": 8.6, "restore_s": 0.0041,
          "relink_s": 0.012, "replay_s": 0.16, "replayed_microbatches": 1, "bytes_transferred": 3 * 2**20,
          "t_fail_ns": 1, "t_detect_ns": 2, "t_restored_ns": 3, "t_end_ns": 4, "open": False}
# metrics.json of a run recorded before the phases were split: restore_s was restart + restore
LEGACY = {"stage": 1, "mode": "kill", "kind": "local", "detect_s": 0.154, "restore_s": 8.68, "replay_s": 0.16,
          "replayed_microbatches": 1, "bytes_transferred": 3 * 2**20, "t_fail_ns": 1, "t_detect_ns": 2,
          "t_restored_ns": 3, "t_end_ns": 4, "open": False}
OPEN = {"stage": 1, "mode": "kill", "kind": "local", "down_s": 3.21, "t_fail_ns": 5, "open": True}


def tracked(tmp_path, state="running", **kw):
    return Tracked(name="r", rd=RunDir(tmp_path), cfg=CFG, method="zerolock", batch="", state=state, **kw)


@pytest.mark.parametrize("state,status,expected", [
    ("running", {"open_recoveries": [OPEN]}, "**stage 1 down — restarting (3.2 s)**"),
    ("recovering", {"open_recoveries": [{**OPEN, "kind": "global", "stage": 0}]},
     "**stage 0 down — every stage rolls back to its last checkpoint (3.2 s)**"),
    ("starting", {"stage_states": ["loading", "importing"]}, "starting: stage 0 loading, stage 1 importing"),
    ("finishing", {"eval_progress": {"phase": "scoring", "scored": 32, "total": 64}},
     "training ended; evaluating the final weights: 32 / 64 examples"),
    ("finishing", {"eval_progress": {"phase": "loading", "scored": 0, "total": None}},
     "training ended; evaluating the final weights (loading)"),
    ("finishing", {"eval_progress": {"phase": "scoring", "scored": 8, "total": 16,
                                     "what": "the weights of step 30 (1 of 9 evals)"}},
     "training ended; evaluating the weights of step 30 (1 of 9 evals): 8 / 16 examples"),
    ("running", {}, "running"),
])
def test_state_words_name_what_the_run_is_waiting_for(tmp_path, state, status, expected):
    assert state_words(tracked(tmp_path, state), status) == expected


def test_status_line_shows_the_outage_and_seconds_per_step_not_running(tmp_path):
    st = {"steps_done": 22, "total_steps": 200, "eta_s": 55.0, "s_per_step": 0.31, "open_recoveries": [OPEN]}
    md = status_markdown(tracked(tmp_path), st)
    assert "stage 1 down — restarting (3.2 s)" in md and "0.31 s/step" in md and "ETA 55 s" in md
    assert " · running ·" not in md


@pytest.mark.parametrize("status,expected", [
    ({}, ""),
    ({"recoveries": [CLOSED]}, "stage 1 kill → local recovery (that stage only): detect 154 ms, restart 8.60 s, "
                               "restore 4.1 ms, relink 12 ms, replay 160 ms (1 micro-batch, 3.00 MiB)"),
    ({"recoveries": [{**CLOSED, "kind": "global", "replayed_microbatches": 4}]},
     "stage 1 kill → global rollback (every stage): detect 154 ms, restart 8.60 s, restore 4.1 ms, relink 12 ms, "
     "replay 160 ms (4 micro-batches, 3.00 MiB)"),
    ({"recoveries": [LEGACY]}, "stage 1 kill → local recovery (that stage only): detect 154 ms, restart + restore "
                               "8.68 s, relink + replay 160 ms (1 micro-batch, 3.00 MiB)"),
    ({"open_recoveries": [OPEN]}, "**stage 1 down — restarting (3.2 s)**"),
])
def test_recovery_line_lists_every_failure(status, expected):
    assert recovery_text(status) == expected


def test_a_reopened_run_keeps_its_recovery_line(tmp_path):
    t = tracked(tmp_path, "finished", metrics=Metrics.from_json({"recovery": [CLOSED], "steps_done": 50}))
    assert recovery_text(t.status()).startswith("stage 1 kill → local recovery")
    assert failures(t.status()) == [CLOSED]


def test_runs_table_row_has_date_duration_and_failures(tmp_path):
    run = tmp_path / "r1"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(CFG))
    (run / "dashboard.json").write_text(json.dumps({"started": "2026-12-01 10:00:00", "method": "zerolock"}))
    (run / "metrics.json").write_text(json.dumps({"config": CFG, "state": "finished", "wall_s": 100.0,
                                                  "setup_s": 30.0, "recovery": [CLOSED],
                                                  "eval": {"label_accuracy": 0.8712}}))
    row = dict(zip(COLUMNS, runs_table(RunsRoot(tmp_path))[0]))
    assert row["run"] == "r1" and row["started"] == "2026-12-01 10:00:00" and row["method"] == "ZeroLock"
    assert row["run time"] == "2.2 min" and row["faults"] == 1 and row["label acc."] == 0.871


def test_a_comparison_says_which_run_and_the_time_left_in_all(tmp_path):
    from app.tabs.watch import comparison_position

    runs = [tracked(tmp_path, "finished", metrics=Metrics.from_json({"wall_s": 50.0, "setup_s": 10.0})), tracked(tmp_path),
            tracked(tmp_path, "queued")]
    assert comparison_position(runs, runs[1], {"eta_s": 40.0, "elapsed_s": 20.0}) == \
        "run 2 of 3 in this comparison, about 1 min 40 s left in all"
    assert comparison_position(runs[:1], runs[0], {}) == ""


def test_the_stage_table_shows_each_stages_layers_while_the_run_goes(tmp_path):
    from app.watch_view import stage_table

    events = [{"stage": s, "kind": "F", "mb": 0, "t0": 0, "t1": 10, "act_bytes": 0, "inflight": 1, "sent": 0,
               "recv": 0, "step": 0, "gen": 0} for s in range(2)]
    rows = stage_table(tracked(tmp_path, events=events))  # no metrics.json yet
    assert [r[1] for r in rows] == ["0–3", "4–7"]  # the tiny model's 8 layers, split evenly


def test_the_whole_of_a_long_run_is_drawn_per_step_not_per_action(tmp_path):
    from app.figures.step_view import AGGREGATE_ABOVE
    from app.watch_view import watch_view

    n = AGGREGATE_ABOVE + 1
    events = [{"stage": i % 2, "kind": "F", "mb": i, "t0": i * 10**6, "t1": i * 10**6 + 5 * 10**5,
               "act_bytes": 0, "inflight": 1, "sent": 0, "recv": 0, "step": i // 100, "gen": 0} for i in range(n)]
    t = tracked(tmp_path, events=events)
    whole = watch_view(t, window_s=None, status={})
    assert whole.timeline.layout.title.text.startswith("Time per step and stage, the whole run")
    recent = watch_view(t, window_s=1.0, status={})  # the run spans 3 s
    assert recent.timeline.layout.title.text.startswith("Timeline per stage (the last")


def test_the_whole_of_a_short_run_is_drawn_per_action_and_says_it_is_the_whole_run(tmp_path):
    from app.watch_view import watch_view

    events = [{"stage": i % 2, "kind": "F", "mb": i, "t0": i * 10**6, "t1": i * 10**6 + 5 * 10**5,
               "act_bytes": 0, "inflight": 1, "sent": 0, "recv": 0, "step": i // 100, "gen": 0} for i in range(200)]
    whole = watch_view(tracked(tmp_path, events=events), window_s=None, status={})
    assert whole.timeline.layout.title.text == "Timeline per stage, the whole run"
    assert whole.memory.layout.title.text == "Activation memory per stage, the whole run"


def test_watch_names_the_runs_of_the_comparison_that_ended_before_the_watched_one(tmp_path):
    from app.tabs.watch import earlier_in_comparison
    from app.watch_view import status_markdown

    ended = tracked(tmp_path, "finished", metrics=Metrics.from_json({
        "wall_s": 50.0, "throughput_samples_per_s": 155.04, "eval": {"label_accuracy": 0.8751, "accuracy": 0.8}}))
    now = Tracked(name="r2", rd=RunDir(tmp_path), cfg=CFG, method="1f1b", batch="", state="running")
    said = earlier_in_comparison([ended, now], now)
    assert said == ("before it in this comparison: ZeroLock · K=2 · b=8 · m=4 · topics · seed 0: finished, "
                    "label accuracy 0.875, 155.0 samples/s (**Compare** shows them side by side)")
    assert said in status_markdown(now, {}, earlier=said)
    assert earlier_in_comparison([ended, now], ended) == "" and earlier_in_comparison([now], now) == ""


def test_a_live_window_draws_memory_only_inside_the_window_its_title_names_and_the_step_it_drew(tmp_path):
    """Watch once titled its memory chart "the last 1.5 s" over a 40–56 s axis (stage 1's outage band,
    from its kill at 40 s, stretched it) and named the status line's step, ahead of the bars. No range is
    pinned (a user's zoom must survive the redraws): what is drawn lies in the window."""
    from app.watch_view import watch_view

    S = 10**9
    kill = {"stage": 1, "kind": "local", "mode": "kill", "t_fail_ns": 40 * S, "t_detect_ns": 41 * S,
            "t_restore_ns": 54 * S, "t_restored_ns": 55 * S, "t_linked_ns": 55 * S, "t_end_ns": 55 * S, "gen": 1}
    events = [{"stage": 1, "kind": "F", "mb": 0, "t0": 39 * S, "t1": 40 * S, "act_bytes": 1000, "inflight": 1,
               "sent": 0, "recv": 0, "step": 7, "gen": 0}]  # stage 1's last action before it was killed
    events += [{"stage": i % 2, "kind": "F", "mb": i, "t0": 54 * S + i * S // 10, "t1": 54 * S + i * S // 10 + S // 20,
                "act_bytes": 1000, "inflight": 1, "sent": 0, "recv": 0, "step": 7 + i // 8 - i % 2,
                "gen": i % 2} for i in range(20)]
    # stage 0 has done step 9, stage 1 step 8: the bars drawn are at step 8 (the status line says 99)
    view = watch_view(tracked(tmp_path, events=events), window_s=1.5, status={"steps_done": 99, "recoveries": [kill]})
    for fig in (view.timeline, view.memory):
        assert "(the last 1.5 s of 17 s of training, at step 8)" in fig.layout.title.text
    memory = view.memory
    assert memory.layout.xaxis.range is None
    end = 54 + 1.9 + 0.05 - 39  # seconds since the run's first action (the axis's zero)
    drawn = [x for trace in memory.data if trace.xaxis in ("x", "x2") for x in (trace.x if trace.x is not None else ())]
    drawn += [x for shape in memory.layout.shapes for x in (shape.x0, shape.x1)]
    held = 0.1  # what a stage held when the window opened is drawn from that action's end
    assert drawn and min(drawn) >= end - 1.5 - held and max(drawn) <= end + 1e-6, sorted(drawn)[:3]


# one word per failure mode in every view: the Inject panel, the Run form, the recovery line, the timeline
MODES_AND_WORDS = [("kill", "kill"), ("stop", "hang"), ("post-step", "kill after step"),
                   ("mid-ckpt", "kill in checkpoint")]


def chosen_by_label() -> dict[str, dict[str, str]]:
    """The failure choices of the Inject panel's radio and the Run form's dropdown: {elem_id: {mode: label}}."""
    import gradio as gr

    from app.failure_panel import build_failure_panel
    from app.tabs.run import build_run_tab

    with gr.Blocks() as demo:
        build_run_tab()
        build_failure_panel(controller=None)
    return {b.elem_id: {value: label for label, value in b.choices} for b in demo.blocks.values()
            if b.elem_id in ("failure-mode", "schedule-failure-mode")}


@pytest.mark.parametrize("mode, word", MODES_AND_WORDS)
def test_every_view_calls_a_failure_mode_by_its_one_word(mode, word):
    from app.figures.timeline import timeline_figure
    from test_app_figures import FAILURE_RUN, recovery
    from zerolock_core.vocabulary import failure_choice, failure_word

    assert failure_word(mode) == word and failure_choice(mode).startswith(f"{word} (")
    assert recovery_text({"recoveries": [{**CLOSED, "mode": mode}]}).startswith(f"stage 1 {word} → ")
    fig = timeline_figure(FAILURE_RUN, stages=2, recoveries=[{**recovery(), "mode": mode}])
    assert [a.text for a in fig.layout.annotations if a.name == "failure-label"] == [word]
    assert {where: labels[mode] for where, labels in chosen_by_label().items()} == \
        {"failure-mode": failure_choice(mode), "schedule-failure-mode": failure_choice(mode)}


def test_no_view_keeps_a_table_of_failure_words_of_its_own():
    import pathlib

    import app
    sources = {p.name: p.read_text() for p in pathlib.Path(app.__file__).parent.glob("*.py")}
    assert not [name for name, text in sources.items() if "SIGSTOP)" in text or "MODE_LABELS" in text
                or "FAILURE_WORDS" in text]


# the Runs table at 1280-1400 px: every column in sight, none cutting a word (cells are monospace, 14 px); the
# browser breaks lines at spaces and after a hyphen that a letter follows ("top-" / "lora:last"), not inside
# "20261203-085510"
CHAR_PX, CELL_PADDING_PX = 8.4, 16
LONGEST_CELLS = {"run": "20261203-085510-zerolock-K2", "started": "2026-12-03 08:55:10",
                 "method": "PipeDream (reference)", "dataset": "csv:desks.csv", "readout": "sample-lora:2 top-lora:last", "K·b·m": "8·32·16",
                 "state": "interrupted", "samples/s": "1234.5", "run time": "12.5 min"}


@pytest.mark.parametrize("column", COLUMNS)
def test_each_runs_column_holds_its_longest_word(column):
    from app.tabs.runs import COLUMN_PX

    words = re.split(r"\s+|(?<=-)(?=[A-Za-z])", f"{column} {LONGEST_CELLS.get(column, '')}")
    assert COLUMN_PX[column] >= max(len(w) for w in words) * CHAR_PX + CELL_PADDING_PX


def test_the_runs_columns_together_fit_the_table_on_a_1280_px_page():
    from app.tabs.runs import COLUMN_PX, TABLE_FITS_PX

    assert list(COLUMN_PX) == COLUMNS and sum(COLUMN_PX.values()) <= TABLE_FITS_PX


# the memory chart on an 820 px page: its plot area is about 590 px wide (Chromium, Gradio 6)
PLOT_PX_AT_820, TITLE_CHAR_EM = 590, 0.6


@pytest.mark.parametrize("measure", ["act_bytes", "inflight"])
@pytest.mark.parametrize("peaks", [None, [2**20, 2**20]])  # the measured peaks ("measured peak per stage")
def test_the_memory_charts_subplot_titles_do_not_meet_at_820_px(tmp_path, measure, peaks):
    from app.figures.layout import SUBTITLE_FONT_PX
    from app.figures.memory import memory_figure

    events = [{"stage": s, "kind": "F", "mb": 0, "t0": 0, "t1": 10**6, "act_bytes": 2**20, "inflight": 1,
               "sent": 0, "recv": 0, "step": 0, "gen": 0} for s in range(2)]
    fig = memory_figure(events, stages=2, measure=measure, peak_bytes=peaks if measure == "act_bytes" else None)
    left, right = sorted((a for a in fig.layout.annotations if a.yanchor == "bottom"), key=lambda a: a.x)
    assert (left.xanchor, right.xanchor) == ("left", "right")  # each grows away from the other

    def width(a):
        return len(a.text) * SUBTITLE_FONT_PX * TITLE_CHAR_EM / PLOT_PX_AT_820  # in paper units

    assert left.x + width(left) < right.x - width(right)
