"""The lessons: every step's recorded example still loads and draws with the current code, with what to
look at outlined; the recordings are what the step's own form values run (so "Run it live" repeats the
recording); every number a step states is read from the record it draws, and the docs quote the same."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import plotly.graph_objects as go
import pytest

from app.form import configs_for
from app.frontier_summary import FRONTIERS
from app.figures.lessons import (DEPTH_STUDY, FRONTIER, HIGHLIGHT, PRESENTER_FONT_PX, SHOWN_STEPS,
                                 gradient_waits, lesson_view, present)
from app.lessons import LESSONS, RECORDINGS, lesson, recording_name
from app.tabs.lessons import neighbour, show
from zerolock_core.analysis.frontier_goal import GOAL
from zerolock_core.analysis.recommended import RECOMMENDED_AT_DEPTH
from zerolock_core.config.run_config import RunConfig
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.telemetry import read_events

DOCS = Path(__file__).resolve().parents[1] / "docs"


def highlights(fig: go.Figure) -> int:
    return (sum(1 for s in fig.layout.shapes if s.name == HIGHLIGHT)
            + sum(1 for a in fig.layout.annotations if a.name == HIGHLIGHT))


@pytest.mark.parametrize("key", [item.key for item in LESSONS])
def test_every_lesson_draws_its_recording_with_what_to_look_at_outlined(key):
    view = lesson_view(lesson(key))
    go.Figure(view.figure.to_dict())  # valid plotly
    assert highlights(view.figure) >= 1 and view.headline
    text, say, *_ = show(key)
    assert lesson(key).title in text and view.headline in text and say == lesson(key).narration


@pytest.mark.parametrize("item", [x for x in LESSONS if x.live], ids=lambda x: x.key)
def test_the_recordings_are_the_runs_the_lesson_starts_live(item, tmp_path):
    """The recorded config is the step's live config (only the directory differs): record the missing ones
    (`python -m app.record_lessons --missing`) whenever a lesson's form values change."""
    for form in item.live:
        configs = configs_for(form, out_for=lambda m: str(tmp_path / m))
        for method, cfg in zip(form.methods, configs):
            if (form, method) not in item.shown:
                continue
            folder = RECORDINGS / recording_name(form, method)
            recorded = RunConfig.from_dict(json.loads((folder / "config.json").read_text()))
            assert recorded == dataclasses.replace(cfg, out=recorded.out)
            assert RunDir(folder).read_metrics().state == "finished"


# ---- every number a step states is the record's --------------------------------------------------------

def record(name: str) -> dict:
    return json.loads((RECORDINGS / name / "metrics.json").read_text())


def events(name: str) -> list[dict]:
    return read_events(RunDir(RECORDINGS / name).event_files())[0]


def gradient_wait_percent(name: str) -> str:
    """Read straight from the event file: RB time within the first SHOWN_STEPS steps over stages x span."""
    ev = events(name)
    origin = min(e["t0"] for e in ev if e["kind"] != "STARTUP")
    end = max(e["t1"] for e in ev if e["kind"] == "STEP" and e["step"] == SHOWN_STEPS)
    stages = len({e["stage"] for e in ev})
    waited = sum(max(0, min(e["t1"], end) - max(e["t0"], origin)) for e in ev if e["kind"] == "RB")
    return f"{100 * waited / (stages * (end - origin)):.0f}"


def bubble_numbers() -> tuple[set[str], set[str]]:
    shares = {gradient_wait_percent(f"{m}-k3-m4-4steps") for m in ("gpipe", "1f1b", "zerolock")}
    return shares, shares | {str(SHOWN_STEPS)}


def memory_numbers() -> tuple[set[str], set[str]]:
    def peak(name: str) -> float:
        return max(p["peak_activation_bytes"] for p in record(name)["per_stage"]) / 2**20

    bp = peak("1f1b-k3-m4-4steps")
    ratios = {f"{bp / peak(name):.1f}" for name in ("zerolock-k3-m4-4steps", "zerolock-k3-m4-4steps-top-lora-last")}
    return ratios, ratios | {f"{bp:.1f}"}


def early_forwarding_numbers() -> tuple[set[str], set[str]]:
    ev = [e for e in events("zerolock-k3-m4-4steps") if not e.get("gen")]
    loss = min((e for e in ev if e["stage"] == 0 and e["kind"] == "L" and e["mb"] == 0), key=lambda e: e["t0"])
    fwd = min((e for e in ev if e["stage"] == 1 and e["kind"] == "F" and e["mb"] == 0), key=lambda e: e["t0"])
    ahead = f"{(loss['t1'] - fwd['t0']) / 1e6:.0f}"
    return {ahead}, {ahead, "0", "1"}  # micro-batch 0; stages 0 and 1


def failure_numbers() -> tuple[set[str], set[str]]:
    said = set()
    for method in ("zerolock", "1f1b"):
        r = record(f"{method}-k3-m4-6steps-fail1at3kill")["recovery"][0]
        said |= {f"{r['total_s']:.2f}", str(r["replayed_microbatches"])}
        stage, after = r["failure"].split(":")[0].split("@")  # "1@3:kill": stage 1 dies in step 4
    return said, said | {stage, str(int(after) + 1)}


def quality_numbers() -> tuple[set[str], set[str]]:
    study = json.loads(DEPTH_STUDY.read_text())
    per_k = {int(k.rpartition("=")[2]): arms for k, arms in study["results"].items() if k.startswith("topics")}
    deepest = max(per_k)

    def runs(k: int, prefix: str) -> list[dict]:
        return next(e["runs"] for arm, e in per_k[k].items() if arm == prefix or arm.startswith(prefix + ":"))

    def mean(xs) -> float:
        xs = list(xs)
        return sum(xs) / len(xs)

    head, bp = (per_k[deepest][arm]["final"]["label_accuracy"]["mean"] for arm in ("zerolock a=1", "bp"))
    said = {f"{head:.3f}", f"{bp:.3f}", str(min(per_k)), str(deepest)}
    drawn: set[str] = set()
    for value in (lambda r: r["seconds_per_step"], lambda r: sum(r["trainable_params"]),
                  lambda r: max(r["stage_activation_bytes"])):
        ratios = [mean(map(value, runs(k, "zerolock a=1 top-lora"))) / mean(map(value, runs(k, "bp"))) for k in per_k]
        drawn |= {f"{min(ratios):.1f}", f"{max(ratios):.1f}"}  # the price panel's labels say them
    frontier = json.loads(FRONTIER.read_text())["summary"]
    for row in frontier:
        if row["arm"] == "1f1b":
            said |= {f"{row['accuracy_mean']:.3f}", str(row["K"]), str(row["steps"])}
        if row["arm"] in ("zerolock top-lora:last", "pipedream"):
            said |= {f"{row['accuracy_mean']:.3f}", str(row["seeds"]), f"{row['activation_peak_vs_1f1b']:.2f}",
                     f"{row['step_time_vs_1f1b']:.2f}"}
    return said, said | drawn


def frontier_numbers() -> tuple[set[str], set[str]]:
    """The arms inside the goal's corner, with their time and memory; the nearest where none is; the goal."""
    from app.figures.frontier_lesson import ARMS

    said, allowed = set(), {f"{GOAL.time_vs_1f1b:g}", f"{GOAL.activation_vs_1f1b:g}"}  # the narration's goal
    for path in FRONTIERS:
        report = json.loads(path.read_text())
        inside = {g["arm"] for g in report["goal"] if g["goal"]}
        for row in report["summary"]:
            allowed |= {str(row["K"])}
            if row["arm"] in inside:
                said |= {f"{row['time_to_bp_vs_1f1b']:.2f}", f"{row['activation_peak_vs_1f1b']:.2f}"}
            elif row["arm"] == RECOMMENDED_AT_DEPTH.arm and row["time_to_bp_vs_1f1b"] is not None:
                said |= {f"{row['time_to_bp_vs_1f1b']:.2f}"}
    return said, said | allowed


NUMBERS = {"bubble": bubble_numbers, "memory": memory_numbers, "early-forwarding": early_forwarding_numbers,
           "failure": failure_numbers, "quality": quality_numbers, "frontier": frontier_numbers}
# names with digits in them, read from the same records (a method, a readout, a model, a task), and a title's
# step number: not numbers the step states
NAMES = re.compile(r"1F1B|top-lora:last|SmolLM2-135M|smollm2-135m|trec6|^### \d ·", re.MULTILINE)


def numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:\.\d+)?", NAMES.sub("", text)))


def figure_words(fig: go.Figure) -> str:
    """What the figure says in words over its data: its outlined notes and its rows' labels."""
    return "\n".join(a.text for a in fig.layout.annotations if a.name in (HIGHLIGHT, "row-label", "price-label"))


@pytest.mark.parametrize("key", list(NUMBERS))
def test_every_number_a_step_states_is_read_from_the_record_it_draws(key):
    headline, allowed = NUMBERS[key]()
    text, say, fig, *_ = show(key)
    stated = numbers(text + "\n" + say + "\n" + figure_words(fig))
    assert stated <= allowed, f"{key}: {sorted(stated - allowed)} stated, not in its record"
    assert headline <= numbers(lesson_view(lesson(key)).headline), key


def test_every_step_is_numbered_by_the_numbers_test():
    assert set(NUMBERS) == {item.key for item in LESSONS}


def test_the_dashboard_page_quotes_what_the_steps_state():
    """docs/dashboard.md's "What the steps state" paragraph holds exactly the headlines' numbers."""
    page = (DOCS / "dashboard.md").read_text()
    quoted = next(p for p in page.split("\n\n") if p.startswith("**What the steps state**"))
    said = set().union(*(numbers(lesson_view(item).headline) for item in LESSONS))
    assert numbers(quoted) == said


# ---- the figures --------------------------------------------------------------------------------------

def test_the_failure_lesson_outlines_one_lane_for_zerolock_and_every_lane_for_1f1b():
    fig = lesson_view(lesson("failure")).figure
    boxes = [s for s in fig.layout.shapes if s.name == HIGHLIGHT and s.type == "rect"]
    assert [(b.yref, b.y1 - b.y0 < 1) for b in boxes] == [("y", True), ("y2", False)]  # stage 1; stages 0-2
    assert [a.text for a in fig.layout.annotations if a.name == HIGHLIGHT] == ["0.80 s · 4 replayed",
                                                                                "1.17 s · 12 replayed"]


def test_a_figure_keeps_in_its_legend_only_what_its_step_talks_about():
    legends = {key: [t.name for t in lesson_view(lesson(key)).figure.data if t.showlegend is not False]
               for key in ("bubble", "failure")}
    assert sorted(legends["bubble"]) == ["B backward", "F forward", "L local loss + backward", "waiting for a gradient",
                                         "waiting for input"]
    assert sorted(legends["failure"]) == ["RELINK relink + resend", "REPLAY", "RESTORE", "failure"]
    # and no recovery label of the timeline's own over the bars (the headline and the notes say it once)
    assert not [a for a in lesson_view(lesson("failure")).figure.layout.annotations
                if a.name in ("RESTORE-label", "REPLAY-label", "failure-band-label")]


def test_bar_numbers_sit_at_the_foot_of_the_bars_away_from_the_error_bars():
    fig = lesson_view(lesson("quality")).figure
    accuracy = [t for t in fig.data if t.error_y.array is not None]
    assert accuracy and all(t.insidetextanchor == "start" and t.textposition == "inside" for t in accuracy)


def test_gradient_waits_are_the_rb_stretches_clipped_to_the_steps_shown():
    ev = [{"stage": 0, "kind": k, "t0": int(a * 1e9), "t1": int(b * 1e9)}
          for k, a, b in (("F", 0.0, 1.0), ("RB", 1.0, 3.0), ("RF", 3.0, 4.0), ("RB", 7.0, 9.0), ("RB", 10, 11))]
    assert gradient_waits(ev, stage=0, origin_ns=0, until_s=8.0) == [(1.0, 3.0), (7.0, 8.0)]
    assert gradient_waits(ev, stage=1, origin_ns=0, until_s=8.0) == []


@pytest.mark.parametrize("key,offset,expected", [
    ("bubble", -1, "bubble"), ("bubble", 1, "memory"), ("quality", 1, "frontier"), ("frontier", 1, "frontier"),
    ("failure", -1, "early-forwarding"), (None, 1, "memory")])
def test_previous_and_next_stay_within_the_lessons(key, offset, expected):
    assert neighbour(key, offset) == expected


def test_presenter_view_enlarges_the_type_and_leaves_the_height_to_the_screen():
    fig = present(lesson_view(lesson("failure")).figure)
    assert fig.layout.font.size == PRESENTER_FONT_PX and fig.layout.height is None
    _, _, shown, *_ = show("bubble", True)
    assert shown.layout.height is None and show("bubble", False)[2].layout.height


def test_an_unknown_lesson_is_refused_with_the_list():
    with pytest.raises(ValueError, match="the lessons are bubble, memory"):
        lesson("nope")


def test_the_lessons_tab_answers_an_unknown_step_in_one_line_not_an_error(tmp_path):
    from app.tabs import lessons as tab_lessons
    from app.controller import EngineController

    text, _, figure, *_ = tab_lessons.show("nope")
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
        shown = tab_compare.compare(controller, default)  # its note first, then its figures (and more)
        assert sum(isinstance(f, go.Figure) for f in shown) >= 3
        # only the listed names: a name built to look like one is an unknown run, refused like any other
        for name in (f"{EXAMPLE_PREFIX}../../etc", f"{EXAMPLE_PREFIX}/etc/passwd", EXAMPLE_PREFIX.strip()):
            assert tab_compare.compare(controller, [name])[0].startswith("⚠️")
    finally:
        controller.close()


GOAL_MET = {"accuracy": True, "seeds": True, "time": True, "ahead of schedules": True, "memory": True}


@pytest.mark.parametrize("reports, says", [
    ([None], ""),  # no committed result
    ([{"summary": []}], ""),  # no summary yet
    ([{"summary": [{"task": "q", "K": 4, "arm": "1f1b", "accuracy_mean": 0.8}]}], ""),  # the pick not measured
    # the deepest K only, its accuracy and price, and which criteria of the goal it misses
    ([{"summary": [
        {"task": "q", "K": 3, "arm": "1f1b", "accuracy_mean": 0.9},
        {"task": "q", "K": 3, "arm": "pipedream recompute", "accuracy_mean": 0.5, "seeds": 1,
         "step_time_vs_1f1b": 1.0, "activation_peak_vs_1f1b": 1.0},
        {"task": "q", "K": 4, "arm": "1f1b", "accuracy_mean": 0.837},
        {"task": "q", "K": 4, "arm": "pipedream recompute", "accuracy_mean": 0.832, "seeds": 3,
         "step_time_vs_1f1b": 0.9212, "activation_peak_vs_1f1b": 0.4517}],
       "goal": [{"task": "q", "K": 4, "arm": "pipedream recompute",
                 "met": {**GOAL_MET, "time": False, "ahead of schedules": False}}]}],
     "On q at K = 4, 0.832 (3 seeds) against backprop's 0.837 at 0.92× 1F1B's time per step and 0.45× its "
     "activations: misses the goal's time and lead over every backprop schedule (the goal: "),
    # two tasks, one line: a generation task's level is its NLL; a task without the pick is left out
    ([{"summary": [{"task": "q", "K": 4, "arm": "1f1b", "accuracy_mean": 0.8}]},
      {"summary": [{"task": "g", "K": 4, "arm": "1f1b", "accuracy_mean": 0.53, "nll_mean": 2.1104},
                   {"task": "g", "K": 4, "arm": "pipedream recompute", "accuracy_mean": 0.529, "nll_mean": 2.1109,
                    "seeds": 3, "step_time_vs_1f1b": 0.7928, "activation_peak_vs_1f1b": 0.4566}],
       "goal": [{"task": "g", "K": 4, "arm": "pipedream recompute", "met": GOAL_MET}]}],
     "On g at K = 4, NLL 2.111 (3 seeds) against backprop's NLL 2.110 at 0.79× 1F1B's time per step and 0.46× "
     "its activations: **meets the goal** (the goal: "),
])
def test_the_run_forms_mark_says_the_price_the_frontier_measured_on_every_task(tmp_path, reports, says):
    from app.frontier_summary import recommended_words
    from zerolock_core.analysis.recommended import RECOMMENDED_AT_DEPTH, RECOMMENDED_MARK

    paths = tuple(tmp_path / f"frontier-{i}.json" for i in range(len(reports)))
    for path, report in zip(paths, reports):
        if report is not None:
            path.write_text(json.dumps(report))
    words = recommended_words(paths)
    assert (says in words) if says else words == ""
    assert not says or (words.startswith(f"{RECOMMENDED_MARK} {RECOMMENDED_AT_DEPTH.words}")
                        and words.count(" at K = ") == 1)
