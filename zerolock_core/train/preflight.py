"""Preflight: everything checked before a run directory, a file or a process exists, in the words of
whoever asked. The CLI (`zerolock train`) and the dashboard's Run form call the same code.

A refusal about one field is a `field_words.FieldError` (a `ConfigError`), rendered with the CLI's flags
(`--microbatches`) or the Run form's labels ("micro-batches m"). `config.validate` checks the config by
itself; `preflight(cfg)` adds what needs a look outside it: the model (its path, its layer count from its
config or GGUF header, never its weights), K and `--boundaries` against those layers, the dataset spec
and the head of a CSV file.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

from ..config.run_config import RunConfig
from ..config.field_words import FieldError, require

ENCODED_HEAD_ROWS = 20  # rows encoded by the tokenizer up front (every row is read and checked)


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
        from ..method.chunks import check_readout_fits, planned_bounds

        # their rules and their messages (they name --boundaries, --readout)
        check_readout_fits(cfg.model.readout, planned_bounds(
            layers, k, boundaries=cfg.model.boundaries, speeds=cfg.train.speeds, readout=cfg.model.readout,
            method=cfg.train.method))
    check_dataset(cfg)


def model_layers(spec: str) -> int | None:
    """The decoder layers of `--model spec`, from its config, never its weights; None when only the
    hub knows (a hub id not in the local cache: its stage processes check K then)."""
    from ..models.presets import PRESETS

    if spec in PRESETS:
        return _preset_layers(spec)
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        require(path.is_file(), "model", lambda w: f"{w.value('model', spec)}: no such GGUF file")
        return gguf_layers(path)
    from ..models.loading import resolve_model

    source = Path(resolve_model(spec))  # refuses a missing directory or one without config.json
    return _config_layers(source) if source.is_dir() else _cached_hub_layers(spec)


def _preset_layers(name: str) -> int | None:
    # a preset is built (converted, generated) on first use, which preflight must not do: read the
    # count from what it is built from
    from ..models import presets

    if name == "smollm2-135m":
        return gguf_layers(presets.smollm2_gguf())  # refuses when the weights are not installed
    if name == "tinyllama-shape":
        from ..models.random_llama import TINYLLAMA

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


def check_dataset(cfg: RunConfig) -> None:
    """A known `--dataset`; a file of your own is read whole and every row checked (data/user_task.py), and
    its task encoded once by the model's tokenizer (label words with distinct first tokens, rows that fit
    `--seq-len`): a bad row is refused here, by its file and row, not by a stage process later."""
    from ..data.registry import ACCEPTED_SPECS, BUILT_IN
    from ..data.sources import parse_source

    spec = cfg.data.dataset
    if spec in BUILT_IN:
        return
    try:
        source = parse_source(spec)
    except ValueError as err:
        raise FieldError("dataset", lambda w, err=err: f"{w.name('dataset')}: {err}") from None
    require(source is not None, "dataset",
            lambda w: f"{w.value('dataset', repr(spec))} is not one of {', '.join(ACCEPTED_SPECS)}")
    try:  # the reader's message names the file: the flag's name is enough before it
        encode_check(cfg, load_data_task(cfg))
    except ValueError as err:
        raise FieldError("dataset", lambda w, err=err: f"{w.name('dataset')}: {err}") from None


def load_data_task(cfg: RunConfig):
    from ..data.registry import load_data
    from .run_setup import DATA_SEED

    return load_data(cfg.data, seed=DATA_SEED)


def encode_check(cfg: RunConfig, task) -> None:
    """The task's first rows encoded by the run's tokenizer, as the run will (a too-short `--seq-len`, label
    words that tokenise alike are refused)."""
    from ..data.encoding import encode_split, label_first_tokens
    from ..models.loading import load_tokenizer

    tokenizer = load_tokenizer(cfg.model.model)
    if task.label_words:
        label_first_tokens(tokenizer, task.label_words)
    encode_split(task.train[:ENCODED_HEAD_ROWS], tokenizer=tokenizer, cue=task.cue, label_words=task.label_words,
                 seq_len=cfg.data.seq_len, chat_template=cfg.data.chat_template)
