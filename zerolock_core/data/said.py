"""A user's words in a one-line refusal: a list of many (classes, fields) cut to its first few and its count,
a long word clipped, a structured value named by its kind — a file of 10,000 classes must not make a
refusal of 160,000 characters, nor a column of structs a Python repr."""
from __future__ import annotations

from collections.abc import Iterable

MAX_LINE = 300  # characters of a refusal
SHOWN_ITEMS = 5  # of a list in a message, the rest counted
WORD_CHARS = 24  # of one word in a message


def clip(text: object, chars: int = WORD_CHARS) -> str:
    s = str(text)
    return s if len(s) <= chars else s[:chars - 1] + "…"


def word(text: object, chars: int = WORD_CHARS) -> str:
    """A word quoted, clipped: 'World'."""
    return repr(clip(text, chars))


def listed(items: Iterable[object], most: int = SHOWN_ITEMS) -> str:
    """"a, b, c" or "a, b, c, d, e, … (10,000 in all)"."""
    items = list(items)
    shown = ", ".join(clip(i) for i in items[:most])
    return shown if len(items) <= most else f"{shown}, … ({len(items):,} in all)"


def structure(value: object) -> str | None:
    """What a structured value is ("structs (JSON objects)", "lists"), None for a plain one."""
    if isinstance(value, dict):
        return "structs (JSON objects)"
    if isinstance(value, (list, tuple)):
        return "lists"
    return None
