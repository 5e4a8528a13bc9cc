"""A model's shape from its config or its GGUF header, never its weights: what preflight.py bounds a run
by (K by the layers, `--seq-len` by the positions, `--lora-rank` by the hidden size) and sizes its memory
from. Any figure the config does not give is None, and the check that needs it is skipped (loading the
model then says what is wrong).
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, fields
from pathlib import Path

from ..config.field_words import require


@dataclass(kw_only=True, frozen=True)
class ModelShape:
    layers: int | None = None
    positions: int | None = None  # max_position_embeddings: the longest sequence the model has positions for
    hidden: int | None = None
    intermediate: int | None = None  # the MLP's inner width
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    vocab: int | None = None

    @property
    def sized(self) -> bool:
        """Every figure a memory estimate needs is known."""
        return all(getattr(self, f.name) is not None for f in fields(self))


def model_shape(spec: str) -> ModelShape:
    """The shape of `--model spec`; an empty shape when only the hub knows (a hub id not in the local
    cache: its stage processes check it then)."""
    from ..models.presets import PRESETS

    if spec in PRESETS:
        return _preset_shape(spec)
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        require(path.is_file(), "model", lambda w: f"{w.value('model', spec)}: no such GGUF file")
        return gguf_shape(path)
    from ..models.loading import resolve_model

    source = Path(resolve_model(spec))  # refuses a missing directory or one without config.json
    return _config_shape(source) if source.is_dir() else _cached_hub_shape(spec)


def model_layers(spec: str) -> int | None:
    """The decoder layers of `--model spec` (None when only the hub knows)."""
    return model_shape(spec).layers


def _preset_shape(name: str) -> ModelShape:
    # a preset is built (converted, generated) on first use, which preflight must not do: read the
    # shape from what it is built from
    from ..models import presets

    if name == "smollm2-135m":
        return gguf_shape(presets.smollm2_gguf())  # refuses when the weights are not installed
    if name == "tinyllama-shape":
        from ..models.random_llama import TINYLLAMA as t

        return ModelShape(layers=t.layers, positions=t.max_positions, hidden=t.hidden, intermediate=t.intermediate,
                          heads=t.heads, kv_heads=t.kv_heads, head_dim=t.hidden // t.heads, vocab=t.vocab)
    return _config_shape(presets.PRESETS[name].directory())  # tiny: embedded, nothing to build


def _config_shape(directory: Path) -> ModelShape:
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError):
        return ModelShape()  # unreadable: loading the model will say why
    if not isinstance(config, dict):
        return ModelShape()
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}

    def whole(*keys: str) -> int | None:
        for key in keys:
            value = config.get(key, text.get(key))
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    hidden, heads = whole("hidden_size", "n_embd"), whole("num_attention_heads", "n_head")
    return ModelShape(layers=whole("num_hidden_layers", "n_layer"),
                      positions=whole("max_position_embeddings", "n_positions"), hidden=hidden,
                      intermediate=whole("intermediate_size", "n_inner"), heads=heads,
                      kv_heads=whole("num_key_value_heads") or heads,
                      head_dim=whole("head_dim") or (hidden // heads if hidden and heads else None),
                      vocab=whole("vocab_size"))


def _cached_hub_shape(hub_id: str) -> ModelShape:
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(hub_id, "config.json")
    except (ImportError, ValueError):
        return ModelShape()
    return _config_shape(Path(found).parent) if isinstance(found, str) else ModelShape()


_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_GGUF_ARRAY, _GGUF_STRING = 9, 8
_GGUF_KEYS = {"block_count": "layers", "context_length": "positions", "embedding_length": "hidden",
              "feed_forward_length": "intermediate", "attention.head_count": "heads",
              "attention.head_count_kv": "kv_heads"}
_GGUF_VOCAB = "tokenizer.ggml.tokens"  # an array: its length is the vocabulary's


def gguf_layers(path: Path) -> int | None:
    return gguf_shape(path).layers


def gguf_shape(path: Path) -> ModelShape:
    """The shape from a GGUF file's header (v2/v3): the `{architecture}.*` figures come before the
    tokenizer's arrays, whose first, the tokens, gives the vocabulary's size; reading stops there, so
    only the first kilobytes are read."""
    found: dict[str, int] = {}
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
            if kind == _GGUF_STRING:
                return text()
            if kind == _GGUF_ARRAY:
                item, n = read("I"), read("Q")
                return [skip(item) for _ in range(n)]
            return read(_GGUF_SCALARS[kind])

        require(f.read(4) == b"GGUF", "model", lambda w: f"{w.value('model', path)}: not a GGUF file")
        try:
            if read("I") < 2:
                return ModelShape()  # GGUF v1 (32-bit counts): let the converter read it
            read("Q")  # tensor count
            arch = None
            for _ in range(read("Q")):
                key, kind = text(), read("I")
                if key == _GGUF_VOCAB and kind == _GGUF_ARRAY:
                    read("I")
                    found["vocab"] = read("Q")
                    break  # the rest is the tokenizer's
                value = skip(kind)
                if key == "general.architecture":
                    arch = value
                elif arch is not None and key.startswith(f"{arch}.") and key[len(arch) + 1:] in _GGUF_KEYS:
                    found[_GGUF_KEYS[key[len(arch) + 1:]]] = int(value)  # type: ignore[call-overload]
        except (EOFError, KeyError, TypeError, ValueError):
            pass  # a truncated or unknown header: what was read stands, the converter says what is wrong
    hidden, heads = found.get("hidden"), found.get("heads")
    found.setdefault("kv_heads", heads)  # absent: no grouped-query attention
    return ModelShape(**found, head_dim=hidden // heads if hidden and heads else None)
