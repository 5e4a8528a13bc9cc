#!/usr/bin/env bash
# The GPU check on a CUDA machine, from a checkout, installing nothing (docs/benchmarks.md, "The GPU check"):
#   bash scripts/gpu_check.sh OUT                    # every section: tests, e1, envelope, e2 (about 8 min, one H200)
#   bash scripts/gpu_check.sh OUT --only envelope    # more flags: zerolock bench gpu --help
# Writes OUT/NAME.json per section (and NAME.log), plus OUT/environment.txt. A section whose JSON exists is
# skipped (--force to rerun). Exit 0 when every section passed, 1 when one failed, 2 when CUDA is missing.
set -uo pipefail
OUT=${1:?usage: bash scripts/gpu_check.sh OUT [zerolock bench gpu flags]}
shift
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the checkout itself, no pip install
# the tinyllama-shape model (~4.4 GB, random weights) and the runs go outside OUT: only the JSONs come back
export ZEROLOCK_CACHE="${ZEROLOCK_CACHE:-/tmp/zerolock-cache}"
WORK=${WORK:-/tmp/zerolock-gpu-work}
"$PY" - > "$OUT/environment.txt" 2>&1 <<'PY'
import importlib.util, platform
print("python", platform.python_version())
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception as err:
    print("torch: not importable:", err)
# optional here; tomli_w missing: runs write config.json only; pytest missing: the checks run without it
for m in ("transformers", "peft", "safetensors", "tokenizers", "numpy", "tqdm", "psutil", "tomli_w", "pytest",
          "plotly", "gradio"):
    print(m, "present" if importlib.util.find_spec(m) else "MISSING")
PY
cat "$OUT/environment.txt"
exec "$PY" -m zerolock_core bench gpu --out "$OUT" --work "$WORK" "$@"
