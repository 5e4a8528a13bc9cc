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

from .config import RunConfig
from .field_words import FieldError, require

CSV_HEAD_ROWS = 20  # a malformed CSV shows in its first rows; the whole file is read by the run


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
        from .chunks import check_readout_fits, chunk_bounds

        # their rules and their messages (they name --boundaries, --readout)
        check_readout_fits(cfg.model.readout, chunk_bounds(layers, k, cfg.model.boundaries))
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
