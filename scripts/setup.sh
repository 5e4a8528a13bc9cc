#!/usr/bin/env bash
# Installs everything ZeroLock needs on a fresh Debian-like machine with Python >= 3.10.
# torch is pinned first: a looser requirement would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$PY" -m pip install -q "torch==2.13.0"
"$PY" -m pip install -q -e ".[app,notebooks,test]"
# Debian's Chromium for the dashboard's browser tests (Playwright drives it; `playwright install`
# cannot download here) and for plotly's PNG export (kaleido). Only as root, only if missing.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
  else
    echo "setup.sh: /usr/bin/chromium is missing; install it as root (apt-get install chromium) for the browser tests" >&2
  fi
fi
