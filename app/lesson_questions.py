"""One predict-then-reveal question per lesson step (questions.py's shape, as Explain's): asked beside the
step's headline, answered from the same record and the same functions (figures/lessons.py) that draw the
step's figure and headline, so the revealed number is the one the step states. No answer is typed in.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from .figures.lessons import (DEPTH_STUDY, SHOWN_STEPS, ahead_ms, depth_groups, deepest, early_forward,
                              gradient_wait_share, peak_mib, readout_of, recorded, recovery_words)
from .figures.frontier_lesson import NAMES, frontiers
from .lessons import SCHEDULES, Lesson, lesson
from .questions import Answer, Question, nearest, reveal
from .run_data import RunData
from zerolock_core.viz.palette import method_label


@dataclass(kw_only=True, frozen=True)
class LessonQuestion:
    question: Question
    answer: Callable[[Lesson], Answer]  # from the step's recordings (or committed results)


def _by_method(runs: list[RunData], method: str, readout: str = "head") -> RunData:
    return next(d for d in runs if d.method == method and readout_of(d) == readout)


WAIT_SHARES = {"none": 0.0, "about a tenth to a fifth": 0.15, "about a third": 1 / 3, "half or more": 0.5}
BUBBLE = Question(key="bubble", prompt=f"In the first {SHOWN_STEPS} steps, what share of its time does a 1F1B "
                                        "stage spend waiting for a gradient?", choices=tuple(WAIT_SHARES))


def bubble_answer(item: Lesson) -> Answer:
    runs = recorded(item)
    share = gradient_wait_share(_by_method(runs, "1f1b"))
    words = ", ".join(f"{method_label(d.method)} {100 * gradient_wait_share(d):.0f} %" for d in runs)
    return Answer(choice=nearest(WAIT_SHARES, share), number=share,
                  why=f"{words}: backprop's stages wait for the gradient from every stage after them; ZeroLock's "
                      "train on a local loss and never do.")


MEMORY_TIMES = {"about the same": 1.0, "about 2×": 2.0, f"about K = {SCHEDULES.stages}×": float(SCHEDULES.stages),
                f"about m = {SCHEDULES.microbatches}×": float(SCHEDULES.microbatches)}
MEMORY = Question(key="memory", prompt="Read out through the paper's frozen head, ZeroLock's largest stage holds "
                                        "how many times less activation memory than 1F1B's?",
                  choices=tuple(MEMORY_TIMES))


def memory_answer(item: Lesson) -> Answer:
    runs = recorded(item)
    bp, zl = max(peak_mib(_by_method(runs, "1f1b"))), max(peak_mib(_by_method(runs, "zerolock")))
    ratio = bp / zl
    return Answer(choice=nearest(MEMORY_TIMES, ratio), number=ratio,
                  why=f"{ratio:.1f}×: 1F1B's largest stage peaks at {bp:.1f} MiB, holding up to K micro-batches "
                      f"until their gradients return; ZeroLock's at {zl:.1f} MiB, one micro-batch at a time.")


AFTER, UNDER = "only after stage 0's loss and backward of it", "while stage 0 still runs them"
EARLY = Question(key="early-forwarding", prompt="Stage 1 starts its forward of a micro-batch…", choices=(AFTER, UNDER))


def early_answer(item: Lesson) -> Answer:
    mb, loss, fwd = early_forward(recorded(item)[0])
    ms = ahead_ms(loss, fwd)
    return Answer(choice=UNDER if ms > 0 else AFTER, number=ms,
                  why=f"micro-batch {mb}'s forward began {ms:.0f} ms before stage 0 had finished its loss and "
                      "backward: the hidden state was sent on (SF) before them.")


REPLAYS = ("none", "fewer than 1F1B", "as many as 1F1B", "more than 1F1B")
FAILURE = Question(key="failure", prompt="After the kill, how many micro-batches does ZeroLock replay?",
                   choices=REPLAYS)


def failure_answer(item: Lesson) -> Answer:
    runs = recorded(item)
    zl, bp = (_by_method(runs, m).metrics.recovery[0]["replayed_microbatches"] for m in ("zerolock", "1f1b"))
    choice = "none" if zl == 0 else REPLAYS[2 + (zl > bp) - (zl < bp)]
    words = " — ".join(f"{method_label(d.method)} {recovery_words(d)[0]}, {recovery_words(d)[1]} replayed"
                       for d in runs)
    return Answer(choice=choice, number=float(zl),
                  why=f"{words}: ZeroLock's failed stage replays what its upstream neighbour kept; 1F1B's every "
                      "stage rolls back to the last checkpoint.")


LEVEL, CLOSE, FAR = "backprop's level", "below it, by less than 0.1", "below it, by 0.1 or more"
QUALITY = Question(key="quality", prompt="At the deepest K measured, the paper's frozen-head readout reaches what "
                                         "label accuracy?", choices=(LEVEL, CLOSE, FAR))


def quality_answer(item: Lesson) -> Answer:
    k, head, bp = deepest(depth_groups(json.loads(DEPTH_STUDY.read_text())))
    gap = bp["mean"] - head["mean"]
    choice = LEVEL if gap <= head["sd"] + bp["sd"] else CLOSE if gap < 0.1 else FAR
    return Answer(choice=choice, number=head["mean"],
                  why=f"at K = {k}, {head['mean']:.3f} against backprop's {bp['mean']:.3f} (mean of the seeds): "
                      "each chunk added is one more that must be readable by the frozen head.")


ALL, SOME, NONE = "all of them", "some of them", "none"
FRONTIER = Question(key="frontier", prompt="Of the real tasks measured, on how many is a configuration without "
                                           "update locking inside the goal's corner?", choices=(ALL, SOME, NONE))


def frontier_answer(item: Lesson) -> Answer:
    shown = frontiers()
    inside = [f.task for f in shown if f.meeting]
    choice = ALL if len(inside) == len(shown) else SOME if inside else NONE
    return Answer(choice=choice, number=float(len(inside)),
                  why=f"inside on {', '.join(inside) or 'none'} of {', '.join(f.task for f in shown)}"
                      + "".join(f"; on {f.task}: {', '.join(NAMES.get(a, a) for a in sorted(f.meeting))}"
                                for f in shown if f.meeting) + ".")


QUESTIONS = {"bubble": LessonQuestion(question=BUBBLE, answer=bubble_answer),
             "memory": LessonQuestion(question=MEMORY, answer=memory_answer),
             "early-forwarding": LessonQuestion(question=EARLY, answer=early_answer),
             "failure": LessonQuestion(question=FAILURE, answer=failure_answer),
             "quality": LessonQuestion(question=QUALITY, answer=quality_answer),
             "frontier": LessonQuestion(question=FRONTIER, answer=frontier_answer)}


def question_of(key: str | None) -> Question:
    """The step's question (ValueError: no such step)."""
    return QUESTIONS[lesson(key or next(iter(QUESTIONS))).key].question


def reveal_step(key: str | None, picked: str | None) -> str:
    """The step's answer beside the student's pick (its number read from the step's record)."""
    try:
        item = lesson(key or next(iter(QUESTIONS)))
    except ValueError as err:
        return f"⚠️ {err}"
    asked = QUESTIONS[item.key]
    return reveal(asked.question, picked if picked in asked.question.choices else None, lambda: asked.answer(item))
