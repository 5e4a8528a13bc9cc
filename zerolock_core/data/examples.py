"""Records shared by every task: one example and one whole task.

Two kinds of task share the encoding (data/encoding.py) and the training:
* classification: the answer is ``" " + label_words[label]`` after the cue;
* response (prompt -> response): the answer is the example's own response text.
"""

from __future__ import annotations

from dataclasses import dataclass

CLASSIFICATION = "classification"
RESPONSE = "response"
TASK_KINDS = (CLASSIFICATION, RESPONSE)
NO_LABEL = -1  # the label index of a response example (label accuracy does not apply)


@dataclass(kw_only=True, frozen=True)
class Example:
    """One example: free text (the prompt) and either the index of its label word or a response."""

    text: str
    label: int = NO_LABEL
    response: str | None = None

    def __post_init__(self) -> None:
        assert self.response is None or self.label == NO_LABEL, "a response example has no label"


@dataclass(kw_only=True, frozen=True)
class TaskData:
    """A fine-tuning task: the answer follows ``cue`` (or the tokenizer's chat template, for a response
    task whose run applies it)."""

    name: str
    label_words: tuple[str, ...]  # () for a response task
    cue: str
    train: tuple[Example, ...]
    eval: tuple[Example, ...]
    description: str

    @property
    def kind(self) -> str:
        return CLASSIFICATION if self.label_words else RESPONSE
