"""Where base models come from: presets (embedded, converted from GGUF, random-shaped), the
GGUF → safetensors conversion, and loading only the part of a model one stage runs."""
