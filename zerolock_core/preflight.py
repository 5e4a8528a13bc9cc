"""Preflight: everything checked before a run directory, a file or a process exists, in the words of
whoever asked. The CLI (`zerolock train`) and the dashboard's Run form call the same code.

A refusal about one field is a `FieldError` (a `ConfigError`): the field's key and a message built
from `FIELDS`, rendered with the CLI's flags (`--microbatches`) or the Run form's labels ("micro-batches
m"). `config.validate` raises it for the rules a form field can break; `preflight(cfg)` adds what needs a
look outside the config: the model (its path, its layer count from its config or GGUF header, never its
weights), K and `--boundaries` against those layers, the dataset spec and the head of a CSV file.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .config import ConfigError, RunConfig

CSV_HEAD_ROWS = 20  # a malformed CSV shows in its first rows; the whole file is read by the run


@dataclass(kw_only=True, frozen=True)
class Field:
    flag: str  # the CLI's name
    label: str  # the Run form's label
    symbol: str = ""  # the short name the form's suggestions use ("m = 2"); "" = the label


FIELDS: dict[str, Field] = {
    "method": Field(flag="--method", label="method"),
    "stages": Field(flag="--stages", label="stages K", symbol="K"),
    "batch": Field(flag="--batch", label="batch b", symbol="b"),
    "microbatches": Field(flag="--microbatches", label="micro-batches m", symbol="m"),
    "steps": Field(flag="--steps", label="steps"),
    "alpha": Field(flag="--alpha", label="α"),
    "consistency": Field(flag="--consistency", label="consistency direction"),
    "lr": Field(flag="--lr", label="learning rate"),
    "seed": Field(flag="--seed", label="seed"),
    "link": Field(flag="--link", label="link between stages"),
    "seq_len": Field(flag="--seq-len", label="sequence length"),
    "eval_size": Field(flag="--eval-size", label="eval examples"),
    "model": Field(flag="--model", label="model"),
    "dataset": Field(flag="--dataset", label="dataset"),
    "boundaries": Field(flag="--boundaries", label="chunk boundaries"),
    "failures": Field(flag="--fail", label="scheduled failure"),
    # the Run form schedules one failure from three fields; the CLI writes them as --fail STAGE@STEP:MODE
    "fail_stage": Field(flag="--fail STAGE", label="failure stage"),
    "fail_step": Field(flag="--fail @STEP", label="failure step"),
}


@dataclass(kw_only=True, frozen=True)
class Words:
    """How one audience names a field: the CLI by its flag, the Run form by its label."""
    form: bool

    def name(self, key: str) -> str:
        f = FIELDS[key]
        return f.label if self.form else f.flag

    def value(self, key: str, value: object) -> str:
        """The field holding a value: "--batch 6" | "batch b = 6" (text: "method 1f1b")."""
        sep = " = " if self.form and isinstance(value, (int, float)) else " "
        return f"{self.name(key)}{sep}{value}"

    def suggest(self, key: str, value: object) -> str:
        """A value to try: "--batch 8" | "b = 8"."""
        f = FIELDS[key]
        return f"{f.symbol or f.label} = {value}" if self.form else f"{f.flag} {value}"


CLI, FORM = Words(form=False), Words(form=True)


class FieldError(ConfigError):
    """A refusal about one field; `str()` is the CLI's wording, `render(FORM)` the Run form's."""

    def __init__(self, field: str, say: Callable[[Words], str]) -> None:
        super().__init__(say(CLI))
        self.field, self.say = field, say

    def render(self, words: Words) -> str:
        return self.say(words)

    def __reduce__(self):  # `say` is a closure: across processes the error travels as its CLI text
        return ConfigError, (str(self),)


def render(err: ConfigError, words: Words) -> str:
    """Any ConfigError in `words`: a FieldError speaks them; the others have one wording (the CLI's)."""
    return err.render(words) if isinstance(err, FieldError) else str(err)


def qualified(err: ConfigError, prefix: str) -> ConfigError:
    """`err` with "PREFIX: " in front (which of several runs it is about), still renderable."""
    if isinstance(err, FieldError):
        return FieldError(err.field, lambda w: f"{prefix}: {err.say(w)}")
    return ConfigError(f"{prefix}: {err}")


def require(ok: bool, field: str, say: Callable[[Words], str]) -> None:
    if not ok:
        raise FieldError(field, say)


# ---- the messages of rules that suggest a valid value -------------------------------------------
def _or(values: list[int]) -> str:
    text = [str(v) for v in values]
    return text[0] if len(text) == 1 else f"{', '.join(text[:-1])} or {text[-1]}"


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]  # O(sqrt n): any --batch is quick
    return sorted({*small, *(n // d for d in small)})


def not_divisible(w: Words, *, batch: int, microbatches: int) -> str:
    """ "--batch 6 is not divisible by --microbatches 4; try --microbatches 2, 3 or 6, or --batch 8"."""
    near = [d for d in _divisors(batch) if d > 1] or [1]
    near = sorted(sorted(near, key=lambda d: (abs(d - microbatches), d))[:3])
    up = -(-batch // microbatches) * microbatches
    return (f"{w.value('batch', batch)} is not divisible by {w.value('microbatches', microbatches)}; "
            f"try {w.suggest('microbatches', _or(near))}, or {w.suggest('batch', up)}")


def microbatches_below_stages(w: Words, *, batch: int, microbatches: int, stages: int) -> str:
    """1F1B's warm-up forwards K micro-batches before the first backward, so it needs m >= K."""
    fits = [d for d in _divisors(batch) if d >= stages]
    if fits:
        fix = w.suggest("microbatches", fits[0])
    else:  # no m >= K divides b: grow b as well
        fix = f"{w.suggest('microbatches', stages)} with {w.suggest('batch', -(-batch // stages) * stages)}"
    return (f"{w.value('method', '1f1b')} needs {w.name('microbatches')} >= {w.name('stages')} "
            f"(got m={microbatches}, K={stages}); try {fix}, or {w.suggest('stages', microbatches)}")


# ---- the form's fields ----------------------------------------------------------------------------
def whole(key: str, value: object) -> int:
    """An integer field's value, or a FieldError: K = 2.5 must not run as K = 2."""
    if value is None or value == "":
        raise FieldError(key, lambda w: f"{w.name(key)} is empty")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FieldError(key, lambda w: f"{w.name(key)} must be a whole number (got {value!r})") from None
    if not math.isfinite(number):
        raise FieldError(key, lambda w: f"{w.name(key)} must be a whole number (got {value})")
    if number != int(number):
        low = math.floor(number)
        raise FieldError(key, lambda w: f"{w.value(key, number)} is not a whole number; "
                                        f"try {w.suggest(key, low)} or {low + 1}")
    return int(number)


def number(key: str, value: object) -> float:
    if value is None or value == "":
        raise FieldError(key, lambda w: f"{w.name(key)} is empty")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FieldError(key, lambda w: f"{w.name(key)} must be a number (got {value!r})") from None


# ---- what needs a look outside the config ---------------------------------------------------------
def preflight(cfg: RunConfig) -> None:
    """What `RunConfig` cannot check by itself, before anything is created, in well under a second:
    the model exists and has at least K layers, `--boundaries` fit them, the dataset is known and a
    CSV's head is well-formed. Raises ConfigError (a FieldError where one field is to blame)."""
    layers = model_layers(cfg.model.model)
    if layers is not None:
        k = cfg.train.stages
        require(k <= layers, "stages",
                lambda w: f"{w.value('stages', k)} must be between 1 and the model's {layers} layers")
        if cfg.model.boundaries is not None:
            from .chunks import chunk_bounds

            chunk_bounds(layers, k, cfg.model.boundaries)  # its rule and its message (they name --boundaries)
    check_dataset(cfg.data.dataset)


def model_layers(spec: str) -> int | None:
    """The decoder layers of `--model spec`, from its config, never its weights; None when only the
    hub knows (a hub id not in the local cache: its stage processes check K then)."""
    from .models.presets import PRESETS

    if spec in PRESETS:
        return _preset_layers(spec)
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        require(path.is_file(), "model", lambda w: f"{w.value('model', spec)}: no such GGUF file")
        return gguf_layers(path)
    from .loading import resolve_model

    source = Path(resolve_model(spec))  # refuses a missing directory or one without config.json
    return _config_layers(source) if source.is_dir() else _cached_hub_layers(spec)


def _preset_layers(name: str) -> int | None:
    # a preset is built (converted, generated) on first use, which preflight must not do: read the
    # count from what it is built from
    from .models import presets

    if name == "smollm2-135m":
        return gguf_layers(presets.smollm2_gguf())  # refuses when the weights are not installed
    if name == "tinyllama-shape":
        from .models.random_llama import TINYLLAMA

        return TINYLLAMA.layers
    return _config_layers(presets.PRESETS[name].directory())  # tiny: embedded, nothing to build


def _config_layers(directory: Path) -> int | None:
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError):
        return None  # unreadable: loading the model will say why
    layers = config.get("num_hidden_layers", (config.get("text_config") or {}).get("num_hidden_layers"))
    return layers if isinstance(layers, int) else None


def _cached_hub_layers(hub_id: str) -> int | None:
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(hub_id, "config.json")
    except (ImportError, ValueError):
        return None
    return _config_layers(Path(found).parent) if isinstance(found, str) else None


_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def gguf_layers(path: Path) -> int | None:
    """`{architecture}.block_count` from a GGUF file's header (v2/v3); it comes before the tokenizer's
    arrays, so only the first kilobytes are read."""
    with path.open("rb") as f:
        def read(fmt: str):
            size = struct.calcsize("<" + fmt)
            data = f.read(size)
            if len(data) != size:
                raise EOFError
            return struct.unpack("<" + fmt, data)[0]

        def text() -> str:
            return f.read(read("Q")).decode("utf-8", "replace")

        def skip(kind: int) -> object:
            if kind == 8:
                return text()
            if kind == 9:
                item, n = read("I"), read("Q")
                return [skip(item) for _ in range(n)]
            return read(_GGUF_SCALARS[kind])

        require(f.read(4) == b"GGUF", "model", lambda w: f"{w.value('model', path)}: not a GGUF file")
        try:
            if read("I") < 2:
                return None  # GGUF v1 (32-bit counts): let the converter read it
            read("Q")  # tensor count
            arch = None
            for _ in range(read("Q")):
                key, value = text(), skip(read("I"))
                if key == "general.architecture":
                    arch = value
                elif arch is not None and key == f"{arch}.block_count":
                    return int(value)  # type: ignore[call-overload]
        except (EOFError, KeyError):
            return None  # a truncated or unknown header: the converter will say what is wrong
    return None


def check_dataset(spec: str) -> None:
    """A known `--dataset` spec; for csv:PATH, its files exist and their first rows are well-formed
    (read by the loader's own reader, limited to the head)."""
    from .data.registry import ACCEPTED_SPECS

    if spec in ACCEPTED_SPECS and ":" not in spec:  # "csv:PATH" is the pattern, not a name
        return
    path_text = spec[len("csv:"):].strip() if spec.startswith("csv:") else ""
    require(bool(path_text), "dataset",
            lambda w: f"{w.value('dataset', repr(spec))} is not one of {', '.join(ACCEPTED_SPECS)}")
    from .data.agnews import read_agnews_csv

    path = Path(path_text)
    sibling = path.with_name("test.csv")  # the loader's eval split, when it is there
    files = [path / "train.csv", path / "test.csv"] if path.is_dir() else \
        [path, *([sibling] if sibling.is_file() and sibling != path else [])]
    for file in files:
        try:
            read_agnews_csv(file, limit=CSV_HEAD_ROWS)
        except ValueError as err:
            raise FieldError("dataset", lambda w, err=err: f"{w.value('dataset', spec)}: {err}") from None
