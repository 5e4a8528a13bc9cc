"""The argparse types of the command line's values: comma-separated numbers and names, and byte sizes.

`zerolock train` and `zerolock bench` parse the same kinds of value with the same code.
"""
from __future__ import annotations

import argparse

BYTE_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6, "gb": 10**9}


def floats_arg(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or comma-separated numbers, got {text!r}") from None


def ints_arg(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def boundaries_arg(text: str) -> tuple[int, ...]:
    """"3,6" -> (3, 6); "auto" -> AUTO (balance.py chooses them from the stages' speeds)."""
    from ..method.balance import AUTO

    if text.strip() == "auto":
        return AUTO
    try:
        return ints_arg(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer indices or auto, got {text!r}") from None


def names_arg(text: str) -> tuple[str, ...]:
    """"q_proj,v_proj" -> ("q_proj", "v_proj"); empty items are dropped (the config refuses no name at all)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def words_arg(text: str) -> tuple[str, ...]:
    """"World,Sports" -> ("World", "Sports"); an empty item is kept for the config to refuse: the label words
    name the classes in order, and dropping one would shift every class after it ("" -> none given)."""
    return tuple(word.strip() for word in text.split(",")) if text.strip() else ()


def bytes_arg(text: str) -> int:
    """"512MiB", "2e8", "32 mb" -> bytes."""
    t = text.strip().lower()
    num = t.rstrip("abegikmi")
    try:
        return int(float(num) * BYTE_UNITS[t[len(num):].strip()])
    except (ValueError, KeyError, OverflowError):  # OverflowError: inf bytes
        raise argparse.ArgumentTypeError(f"expected a size like 512MiB or 2e8, got {text!r}") from None
