"""Colours and names shared by every view: one colour per action kind, per stage, per method."""
from __future__ import annotations

# One colour per action kind, used by every timeline (live, compare, explain, notebooks).
# Compute is saturated; sends are light tints of the compute they carry; waits are muted.
KIND_COLOURS: dict[str, str] = {
    "F": "#2F6FDB",  # forward
    "L": "#2CA02C",  # ZeroLock local step: readout + local loss + local backward
    "B": "#E8772E",  # backward (BP methods)
    "SF": "#9CC3F5",  # send hidden state downstream
    "RF": "#B9A6D6",  # receive hidden state (time spent waiting for it)
    "SB": "#F8C08F",  # send gradient upstream
    "RB": "#E7A1B7",  # receive gradient (time spent waiting for it)
    "STEP": "#6B4226",  # optimizer step
    "CKPT": "#17A2B8",  # checkpoint
    "REPLAY": "#D62728",  # replay of a micro-batch after recovery
    "RESTORE": "#8E44AD",  # restore from a checkpoint (recovery)
    "WAIT": "#BDBDBD",  # any other wait
}
UNKNOWN_KIND_COLOUR = "#7F7F7F"

KIND_LABELS: dict[str, str] = {
    "F": "F forward",
    "L": "L local loss + backward",
    "B": "B backward",
    "SF": "SF send hidden",
    "RF": "RF wait for hidden",
    "SB": "SB send gradient",
    "RB": "RB wait for gradient",
    "STEP": "STEP optimizer",
    "CKPT": "CKPT checkpoint",
    "REPLAY": "REPLAY",
    "RESTORE": "RESTORE",
    "WAIT": "WAIT",
}
KIND_ORDER: tuple[str, ...] = tuple(KIND_COLOURS)
COMPUTE_KINDS = frozenset({"F", "L", "B", "STEP", "CKPT", "REPLAY", "RESTORE"})

STAGE_COLOURS: tuple[str, ...] = ("#1F77B4", "#FF7F0E", "#2CA02C", "#9467BD", "#8C564B", "#E377C2",
                                  "#17BECF", "#BCBD22")

METHOD_LABELS: dict[str, str] = {
    "zerolock": "ZeroLock",
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "pipedream": "PipeDream",
    "bp": "BP reference",
}
METHOD_COLOURS: dict[str, str] = {
    "zerolock": "#2CA02C",
    "gpipe": "#E8772E",
    "1f1b": "#9467BD",
    "pipedream": "#8C564B",
    "bp": "#555555",
}


def kind_colour(kind: str) -> str:
    return KIND_COLOURS.get(kind, UNKNOWN_KIND_COLOUR)


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind)


def stage_colour(stage: int) -> str:
    return STAGE_COLOURS[stage % len(STAGE_COLOURS)]


def method_colour(method: str) -> str:
    return METHOD_COLOURS.get(method, "#333333")


def method_label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


def kind_sort_key(kind: str) -> tuple[int, str]:
    """Legend order: the known kinds in KIND_ORDER, then anything new alphabetically."""
    return (KIND_ORDER.index(kind), "") if kind in KIND_ORDER else (len(KIND_ORDER), kind)
