"""One predict-then-reveal question per lesson step, answered from the step's own record: the number revealed
is the one the step's headline states, and the choice marked right is the one that number makes right."""
import json

import pytest

from app.figures.lessons import (DEPTH_STUDY, ahead_ms, deepest, depth_groups, early_forward, gradient_wait_share,
                                 lesson_view, peak_mib, recorded)
from app.frontier_summary import FRONTIERS
from app.lesson_questions import QUESTIONS, reveal_step
from app.lessons import LESSONS, lesson


def _record_number(key: str) -> tuple[float, str]:
    """The step's number read straight from its record, and how its headline writes it."""
    item = lesson(key)
    if key == "quality":
        head = deepest(depth_groups(json.loads(DEPTH_STUDY.read_text())))[1]["mean"]
        return head, f"{head:.3f}"
    if key == "frontier":  # how many tasks have an arm inside the goal's corner, read from each file's goal rows
        inside = []
        for path in FRONTIERS:
            report = json.loads(path.read_text())
            if any(g["goal"] for g in report["goal"]):
                inside.append(report["summary"][0]["task"])
        return float(len(inside)), (f"{inside[0]} **" if inside else "nothing is")
    runs = recorded(item)
    by = {(d.method, (d.config.get("model") or {}).get("readout", "head")): d for d in runs}
    if key == "bubble":
        share = gradient_wait_share(by["1f1b", "head"])
        return share, f"**{100 * share:.0f} %**"
    if key == "memory":
        ratio = max(peak_mib(by["1f1b", "head"])) / max(peak_mib(by["zerolock", "head"]))
        return ratio, f"**{ratio:.1f}×**"
    if key == "early-forwarding":
        ms = ahead_ms(*early_forward(runs[0])[1:])
        return ms, f"**{ms:.0f} ms**"
    replayed = by["zerolock", "head"].metrics.recovery[0]["replayed_microbatches"]
    return float(replayed), f"**{by['zerolock', 'head'].metrics.recovery[0]['total_s']:.2f} s**, {replayed}"


def test_every_step_has_exactly_one_question():
    assert list(QUESTIONS) == [item.key for item in LESSONS]
    assert all(2 <= len(q.question.choices) <= 4 for q in QUESTIONS.values())


@pytest.mark.parametrize("key", [item.key for item in LESSONS])
def test_the_answer_is_the_number_the_steps_headline_states(key):
    asked = QUESTIONS[key]
    answer = asked.answer(lesson(key))
    number, written = _record_number(key)
    assert answer.number == pytest.approx(number) and answer.choice in asked.question.choices
    assert written in lesson_view(lesson(key)).headline  # the headline states the same number


@pytest.mark.parametrize("key", [item.key for item in LESSONS])
def test_revealing_marks_the_pick_right_or_not(key):
    asked = QUESTIONS[key]
    right = asked.answer(lesson(key)).choice
    wrong = next(c for c in asked.question.choices if c != right)
    assert reveal_step(key, right).startswith(f"**Right: {right}.**")
    assert reveal_step(key, wrong).startswith(f"**Not quite: {right}** (you said {wrong})")
    assert reveal_step(key, None).startswith(f"**The answer: {right}.**")
    assert reveal_step(key, "not a choice").startswith("**The answer:")  # a forged pick counts as none


def test_a_step_the_list_does_not_hold_is_refused_in_one_line():
    assert reveal_step("nope", None).startswith("⚠️ no lesson 'nope'")
