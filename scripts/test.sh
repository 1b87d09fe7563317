#!/usr/bin/env bash
# The test command: set-up (idempotent), then the test suite CI runs, with set-up's Python.
# GPU and large-download tests are deselected; pass extra pytest arguments to narrow the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The docker-marked tests need docker.io (and docker-registry); nothing else does, so only this
# command installs them.
WMRL_SETUP_DOCKER=1 bash scripts/setup.sh
# verl pins transformers<5.11, so its integration tests run in a virtualenv of their own.
bash scripts/setup_verl.sh >/dev/null
# Harbor needs Python >= 3.12 and Docker Compose v2: its own virtualenv too (the harbor tests).
bash scripts/setup_harbor.sh >/dev/null
source scripts/_env.sh
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# The house rules first (pyproject.toml's [tool.ruff]); the architecture contracts run in the tests.
"$PY" -m ruff check --quiet . || { echo "ruff: the house rules failed (fix, or see pyproject.toml's [tool.ruff])"; exit 1; }
exec "$PY" -m pytest -m "not gpu and not download" -p no:cacheprovider "$@"
