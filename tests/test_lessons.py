"""The lessons: every step's recorded example still loads and draws with the current code, with what to
look at outlined; the recordings are what the step's own form values run (so "Run it live" repeats the
recording); the outlines and numbers come from the data."""
from __future__ import annotations

import dataclasses
import json

import plotly.graph_objects as go
import pytest

from app.form import configs_for
from app.figures.lessons import HIGHLIGHT, PRESENTER_FONT_PX, PRESENTER_HEIGHT_PX, idle_gaps, lesson_figures, present
from app.lessons import LESSONS, RECORDINGS, lesson, recording_name
from app.tabs.lessons import neighbour, show
from zerolock_core.config.run_config import RunConfig
from zerolock_core.rundir.run_dir import RunDir


def highlights(fig: go.Figure) -> int:
    return (sum(1 for s in fig.layout.shapes if s.name == HIGHLIGHT)
            + sum(1 for a in fig.layout.annotations if a.name == HIGHLIGHT))


@pytest.mark.parametrize("key", [item.key for item in LESSONS])
def test_every_lesson_draws_its_recording_with_what_to_look_at_outlined(key):
    main, second, numbers = lesson_figures(lesson(key))
    for fig in (main, second):
        if fig is not None:
            go.Figure(fig.to_dict())  # valid plotly
    assert highlights(main) >= 1 and numbers
    text, *_ = show(key)
    assert lesson(key).title in text and numbers in text


@pytest.mark.parametrize("item", [x for x in LESSONS if x.live is not None], ids=lambda x: x.key)
def test_the_recordings_are_the_runs_the_lesson_starts_live(item, tmp_path):
    """The recorded config is the step's live config (only the directory differs): re-record
    (`python -m app.record_lessons`) whenever a lesson's form values change."""
    configs = configs_for(item.live, out_for=lambda m: str(tmp_path / m))
    for method, cfg in zip(item.live.methods, configs):
        if method not in item.shown:
            continue
        recorded = RunConfig.from_dict(json.loads((RECORDINGS / recording_name(item.live, method) /
                                                   "config.json").read_text()))
        assert recorded == dataclasses.replace(cfg, out=recorded.out)
        assert RunDir(RECORDINGS / recording_name(item.live, method)).read_metrics().state == "finished"


def test_the_failure_lesson_shows_a_local_recovery_against_a_global_rollback():
    main, second, numbers = lesson_figures(lesson("failure"))
    assert "ZeroLock (local)" in numbers and "1F1B (global)" in numbers
    assert highlights(main) == 1 and highlights(second) == 3  # the failed lane; every lane


def test_the_bubble_is_where_a_lane_computes_nothing():
    ev = [{"stage": 0, "kind": k, "t0": int(a * 1e9), "t1": int(b * 1e9)}
          for k, a, b in (("F", 0.0, 1.0), ("RB", 1.0, 3.0), ("B", 3.0, 4.0), ("F", 4.5, 5.0), ("B", 9.0, 9.5))]
    # RB is waiting, not computing; the gap at 4.0-4.5 is under the minimum; 9.0 is past `until`
    assert idle_gaps(ev, stage=0, until_s=8.0, origin_ns=0, min_s=0.6) == [(1.0, 3.0)]
    late = [{"stage": 2, "kind": "F", "t0": int(2e9), "t1": int(3e9)}]  # waiting for its first input counts
    assert idle_gaps(late, stage=2, until_s=8.0, origin_ns=0, min_s=0.5) == [(0.0, 2.0)]


@pytest.mark.parametrize("key,offset,expected", [
    ("bubble", -1, "bubble"), ("bubble", 1, "memory"), ("quality", 1, "quality"), ("failure", -1, "early-forwarding"),
    (None, 1, "memory")])
def test_previous_and_next_stay_within_the_lessons(key, offset, expected):
    assert neighbour(key, offset) == expected


def test_presenter_view_enlarges_the_type_and_fits_a_screen():
    main, second, _ = lesson_figures(lesson("failure"))
    one, two = present(main, share=2), present(second, share=2)
    assert one.layout.font.size == PRESENTER_FONT_PX and one.layout.height + two.layout.height <= PRESENTER_HEIGHT_PX
    text, fig, *_ = show("bubble", True)
    assert fig.layout.height <= PRESENTER_HEIGHT_PX


def test_an_unknown_lesson_is_refused_with_the_list():
    with pytest.raises(ValueError, match="the lessons are bubble, memory"):
        lesson("nope")


def test_the_lessons_tab_answers_an_unknown_step_in_one_line_not_an_error(tmp_path):
    from app.tabs import lessons as tab_lessons
    from app.controller import EngineController

    text, figure, *_ = tab_lessons.show("nope")
    assert text.startswith("⚠️ no lesson 'nope'") and figure is None
    controller = EngineController(tmp_path / "runs")
    try:
        message, started = tab_lessons.run_live(controller, "nope")
    finally:
        controller.close()
    assert message.startswith("⚠️ no lesson 'nope'") and not started and not (tmp_path / "runs").exists()


def test_compare_lists_the_recordings_and_opens_on_the_schedules_example_before_any_run(tmp_path):
    from app.tabs import compare as tab_compare
    from app.controller import EngineController
    from app.lessons import EXAMPLE_PREFIX, recorded_runs

    controller = EngineController(tmp_path / "runs")
    try:
        names, default = tab_compare.run_choices(controller)
        assert set(recorded_runs()) <= set(names) and default == list(tab_compare.DEFAULT_EXAMPLES)
        note, timeline, memory, summary = tab_compare.compare(controller, default)
        assert all(isinstance(f, go.Figure) for f in (timeline, memory, summary))
        # only the listed names: a name built to look like one is an unknown run, refused like any other
        for name in (f"{EXAMPLE_PREFIX}../../etc", f"{EXAMPLE_PREFIX}/etc/passwd", EXAMPLE_PREFIX.strip()):
            assert tab_compare.compare(controller, [name])[0].startswith("⚠️")
    finally:
        controller.close()
