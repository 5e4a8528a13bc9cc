"""What the dashboard calls a run, one definition everywhere (the Runs table and picker, Compare's
selector, legends and verdict, Watch's title, figure titles):

    ZeroLock · top-lora:last · K=3 · csv:desks.csv · seed 0

its method ("(reference)" when a pipeline method trained in one process), its readout only where some
chunk reads through it (not the plain head), K (and b, m where asked), its dataset (a user's file by its
name, never this machine's path) and its seed. Read from the run's config, so a run reopened from disk,
a live one and a recording are named alike."""
from __future__ import annotations

from typing import Any, Mapping

from zerolock_core.config.readout_spec import HEAD, ReadoutSpec
from zerolock_core.methods import every_chunk_trains
from zerolock_core.viz.palette import method_label

Config = Mapping[str, Any]


def _section(config: Config, name: str) -> Mapping[str, Any]:
    return config.get(name) or {}


def method_name(method: str, runtime: str) -> str:
    """"ZeroLock", or "ZeroLock (reference)" for a pipeline method trained by the one-process oracle (BP is
    a one-process method by nature: never marked)."""
    name = method_label(method)
    return name if runtime == "pipeline" or method == "bp" else f"{name} (reference)"


def readout_text(config: Config) -> str:
    """The run's --readout as configured (the plain head when the config says nothing)."""
    return str(_section(config, "model").get("readout") or "head")


def shown_readout(config: Config, *, method: str, stages: int) -> str:
    """The readout where some chunk reads through it; "" for the plain head, and for a readout the method
    never uses (BP's chunks before the last read none of their own). An unknown spec is shown as written."""
    text = readout_text(config)
    try:
        spec = ReadoutSpec.parse(text)
    except ValueError:
        return text
    trains = every_chunk_trains(method)
    return "" if all(spec.of_chunk(k, stages, every_chunk_trains=trains) == HEAD for k in range(stages)) else text


def dataset_name(config: Config) -> str:
    """"topics", or a user's file as "csv:desks.csv" (its kind and file name, not the folder it lies in);
    "" when the config names none."""
    data = str(_section(config, "data").get("dataset") or "")
    kind, colon, path = data.partition(":")
    return f"{kind}:{path.replace(chr(92), '/').rsplit('/', 1)[-1]}" if colon else data


def seed_of(config: Config) -> int | None:
    seed = _section(config, "train").get("seed")
    return None if seed is None else int(seed)


def run_label(config: Config, *, method: str, stages: int | None = None, shape: bool = False) -> str:
    """The run's name in every view (module docstring); `shape` adds b and m after K (Watch's title, a
    figure of one run). `stages` defaults to the config's."""
    train = _section(config, "train")
    k = int(stages if stages is not None else train.get("stages") or 1)
    parts = [method_name(method, str(train.get("runtime", "pipeline"))), shown_readout(config, method=method, stages=k),
             f"K={k}"]
    if shape:
        parts += [f"b={train.get('batch')}", f"m={train.get('microbatches')}"]
    seed = seed_of(config)
    parts += [dataset_name(config), f"seed {seed}" if seed is not None else ""]
    return " · ".join(p for p in parts if p)
