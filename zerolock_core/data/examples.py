"""Records shared by every task: one labelled example and one whole task."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(kw_only=True, frozen=True)
class Example:
    """One classification example: free text and the index of its label word."""

    text: str
    label: int


@dataclass(kw_only=True, frozen=True)
class TaskData:
    """A fine-tuning task: the answer is ``" " + label_words[label]`` after ``cue``."""

    name: str
    label_words: tuple[str, ...]
    cue: str
    train: tuple[Example, ...]
    eval: tuple[Example, ...]
    description: str
