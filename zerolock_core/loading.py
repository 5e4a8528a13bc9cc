"""Load a base causal LM + tokenizer: the embedded tiny preset, a local directory, or a hub id.

All three go through the same `AutoModelForCausalLM` / `AutoTokenizer` code path.
"""
from __future__ import annotations

from pathlib import Path

import torch

from .config import ConfigError

TINY_DIR = Path(__file__).resolve().parent / "assets" / "tiny"
PRESETS = {"tiny": TINY_DIR}


def resolve_model(spec: str) -> str:
    """Maps a `--model` value to what `from_pretrained` takes."""
    if spec in PRESETS:
        path = PRESETS[spec]
        if not (path / "config.json").exists():
            raise ConfigError(f"--model {spec}: the embedded preset is missing at {path}; "
                              "rebuild it with `zerolock pretrain-tiny`")
        return str(path)
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir() or not (path / "config.json").exists():
            raise ConfigError(f"--model {spec}: not a model directory (no config.json); "
                              "expected a directory written by save_pretrained")
        return str(path)
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1:
        raise ConfigError(f"--model {spec}: no such directory")
    return spec  # a hub id


def load_tokenizer(spec: str):
    from transformers import AutoTokenizer

    source = resolve_model(spec)
    try:
        tok = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as err:
        raise ConfigError(f"--model {spec}: could not load its tokenizer ({_first_line(err)})") from None
    return tok


def load_causal_lm(spec: str, *, dtype: torch.dtype = torch.float32):
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one bar per stage process would garble the terminal
    source = resolve_model(spec)
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
