"""Load a base causal LM + tokenizer: a preset (`tiny`, `smollm2-135m`, ...), a `.gguf` file, a
local directory, or a hub id. All go through the same `AutoModelForCausalLM` / `AutoTokenizer`
code path; a stage process loads only its own part (`keep=`)."""
from __future__ import annotations

from pathlib import Path

import torch

from ..config.field_words import ConfigError
from .partial_load import Keep, load_partial, safetensors_files
from .presets import PRESETS, converted_gguf_dir

__all__ = ["Keep", "resolve_model", "load_tokenizer", "load_causal_lm"]


def resolve_model(spec: str) -> str:
    """Maps a `--model` value to what `from_pretrained` takes (building a preset on first use)."""
    if spec in PRESETS:
        return str(PRESETS[spec].directory())
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ConfigError(f"--model {spec}: no such GGUF file")
        return str(converted_gguf_dir(path))
    if path.exists():
        if not path.is_dir() or not (path / "config.json").exists():
            raise ConfigError(f"--model {spec}: not a model directory (no config.json); "
                              "expected a directory written by save_pretrained")
        return str(path)
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1:
        raise ConfigError(f"--model {spec}: no such directory (presets: {', '.join(PRESETS)})")
    return spec  # a hub id


def load_tokenizer(spec: str):
    from transformers import AutoTokenizer

    source = resolve_model(spec)
    try:
        tok = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as err:
        raise ConfigError(f"--model {spec}: could not load its tokenizer ({_first_line(err)})") from None
    return tok


def load_causal_lm(spec: str, *, dtype: torch.dtype = torch.float32, keep: Keep | None = None):
    """The frozen base model in eval mode. With `keep`, only those layers (+ norm and head, + the
    embedding if kept) hold weights; the rest stay on the meta device and are never read."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one bar per stage process would garble the terminal
    source = resolve_model(spec)
    if keep is not None and Path(source).is_dir() and safetensors_files(Path(source)):
        model = load_partial(Path(source), keep, dtype=dtype)
    else:  # a hub id or .bin weights: load everything (a part of it is not addressable on disk)
        try:
            model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, attn_implementation="sdpa")
        except (OSError, ValueError) as err:
            hint = "" if Path(source).exists() else " (is the hub reachable? set HF_HUB_OFFLINE=1 to use only the local cache)"
            raise ConfigError(f"--model {spec}: could not load the model ({_first_line(err)}){hint}") from None
    model.eval()  # no dropout anywhere: determinism is our test oracle
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__
