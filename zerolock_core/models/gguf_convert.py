"""Convert a GGUF file once into a plain safetensors model directory.

`transformers` reads GGUF (with the `gguf` package) by dequantising every tensor, which takes a
minute; the converted directory then loads in under a second through the ordinary path, and a
stage can read only its own tensors from it. The weights are the dequantised values (for a
Q4_1 file: 4-bit blocks of 32 weights with an fp16 scale and minimum), kept in fp32 so that no
second rounding is added.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from ..config.field_words import ConfigError


def require_gguf_package() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError:
        from .locations import REAL_MODEL_INSTALL

        raise ConfigError(f"reading a GGUF model needs the `gguf` package: {REAL_MODEL_INSTALL}") from None


def convert_gguf(gguf_file: Path, target: Path) -> Path:
    """Write `target` (config, safetensors weights, tokenizer) from `gguf_file`, atomically."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not gguf_file.is_file():
        raise ConfigError(f"--model {gguf_file}: no such GGUF file")
    started = time.perf_counter()
    print(f"converting {gguf_file.name} into {target} (once; about a minute) ...", file=sys.stderr, flush=True)
    src_dir, name = str(gguf_file.parent), gguf_file.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=name, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as err:
        raise ConfigError(f"--model {gguf_file}: transformers could not read it as a GGUF model ({err})") from None
    # The weights are dense now, but the GGUF "quantizer" stays attached and save_pretrained
    # refuses a quantised model: detach it.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "zerolock_source.json").write_text(json.dumps({
        "gguf_file": str(gguf_file), "bytes": gguf_file.stat().st_size, "dtype": "float32",
        "converted_s": round(time.perf_counter() - started, 1)}, indent=1))
    os.replace(tmp, target)
    print(f"converted in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return target
