"""Predict-then-reveal questions, one shape for every tab that asks one (Explain's sections, the Lessons'
steps): a question's words and choices are fixed; its answer is computed when it is revealed, from the same
record or function that draws what it asks about, so it never disagrees with the figure.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(kw_only=True, frozen=True)
class Question:
    key: str
    prompt: str
    choices: tuple[str, ...]


@dataclass(kw_only=True, frozen=True)
class Answer:
    choice: str  # one of the question's choices
    why: str
    number: float | None = None  # the measured number the choice rests on, where there is one


def nearest(values: Mapping[str, float], number: float) -> str:
    """The choice whose value is nearest `number` (the first of two as near)."""
    return min(values, key=lambda c: abs(values[c] - number))


def reveal(question: Question, picked: str | None, answer: Callable[[], Answer]) -> str:
    """The answer beside the student's pick, or why there is none for these settings."""
    try:
        a = answer()
    except (ValueError, FileNotFoundError) as err:
        return f"No answer for these settings: {err}"
    assert a.choice in question.choices, (question.key, a.choice)
    if picked is None:
        verdict = f"**The answer: {a.choice}.**"
    elif picked == a.choice:
        verdict = f"**Right: {a.choice}.**"
    else:
        verdict = f"**Not quite: {a.choice}** (you said {picked})."
    return f"{verdict} {a.why}"
