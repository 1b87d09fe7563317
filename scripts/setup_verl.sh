#!/usr/bin/env bash
# verl's own virtualenv, for the verl integration (trainers/integrations/verl.py).
# verl 0.9.1 pins transformers<5.11 and Python<3.13, which the main environment does not meet,
# so it lives apart: ${WMRL_VERL_VENV:-${WMRL_HOME:-~/.cache/wmrl}/verl-venv}, outside the checkout.
#   1. the venv, created once from the base interpreter of the project's Python (scripts/_env.sh),
#      or from ${PYTHON} when set;
#   2. a dry-run resolution that must pick the local CPU torch 2.13.0 and no CUDA packages;
#   3. verl, torch (CPU), a transformers that verl accepts, Ray, pytest and this checkout
#      (editable, with its runtime dependencies from pyproject.toml), verl's own dependencies
#      pinned to a resolution that was checked here (below).
# A marker keyed on this script, the build files, this checkout and the interpreter makes a
# second run take seconds. Prints the venv's python on its last line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WMRL_HOME=${WMRL_HOME:-$HOME/.cache/wmrl}
VERL_VENV=${WMRL_VERL_VENV:-$WMRL_HOME/verl-venv}
VPY="$VERL_VENV/bin/python"
log() { echo "[setup_verl] $*" >&2; }

if [ ! -x "$VPY" ]; then
  if [ -n "${PYTHON:-}" ]; then
    base="$PYTHON"
  else
    source scripts/_env.sh
    # A venv's python links into its base interpreter; build from that, never from inside a venv.
    base=$("$PY" -c 'import sys; print(sys._base_executable)' 2>/dev/null || command -v python3.11)
  fi
  "$base" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] < (3, 13)))' || {
    log "verl 0.9.1 needs Python >=3.10,<3.13; $base is $("$base" -V 2>&1). Set PYTHON=python3.11."; exit 1; }
  log "creating $VERL_VENV from $base"
  mkdir -p "$(dirname "$VERL_VENV")"
  "$base" -m venv "$VERL_VENV"
fi

# torch is pinned so pip takes the local CPU build (an unpinned torch pulls multi-GB CUDA wheels);
# transformers 5.10 is the newest that verl 0.9.1 accepts (>=5.5.3,<5.11, !=5.6.0).
requirements=("verl==0.9.1" "torch==2.13.0" "transformers==5.10.4" "ray[default]==2.60.0"
              "pytest>=8" "pytest-timeout>=2.3" -e .)
# verl's dependencies as one resolution of verl==0.9.1 with torch==2.13.0 chose them. Unpinned,
# pip's resolver went backtracking through every wandb, peft and virtualenv release and had not
# finished after 7 minutes. To move them: resolve `verl==X torch==2.13.0` alone with
# `pip install --dry-run --report r.json` in a fresh venv and copy the chosen versions here.
read -r -d '' PINS <<'EOF' || true
Jinja2==3.1.6 Markdown==3.11.3 MarkupSafe==3.0.4 PyYAML==6.0.4 Pygments==2.21.0 Werkzeug==3.1.9
absl-py==2.5.1 accelerate==1.15.0 aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiohttp-cors==0.8.1
aiosignal==1.4.0 annotated-doc==0.0.7 annotated-types==0.8.0 antlr4-python3-runtime==4.9.3
anyio==4.16.0 attrs==26.1.0 certifi==2026.10.19.post1 cffi==2.1.1 charset-normalizer==3.5.3
click==8.5.1 cloudpickle==3.1.3 codetiming==1.4.0 colorful==0.5.8 cryptography==50.0.2
cwevals==0.0.1b1 datasets==5.2.0 dill==0.4.1 distlib==0.4.4 distro==1.9.0 filelock==4.3.1
frozenlist==1.8.0 fsspec==2026.9.0 google-api-core==2.44.0 google-auth==2.63.0
googleapis-common-protos==1.76.0 grpcio==1.85.3 h11==0.16.0 hf-xet==1.8.0 httpcore==1.0.9
httpx==0.28.1 huggingface_hub==1.33.0 hydra-core==1.3.8 idna==3.20 importlib_metadata==10.2.0
jsonschema==4.26.0 jsonschema-specifications==2025.9.1 lazy-importer==0.1.0 markdown-it-py==4.3.0
mdurl==0.1.2 mpmath==1.3.0 msgpack==1.2.4 multidict==7.2.1 multiprocess==0.70.19 networkx==3.6.1
numpy==2.4.6 omegaconf==2.3.1 opencensus==0.11.4 opencensus-context==0.1.3
opentelemetry-api==1.45.2 opentelemetry-exporter-http-transport==0.66b2
opentelemetry-exporter-otlp-common==0.66b2 opentelemetry-exporter-otlp-proto-common==1.45.2
opentelemetry-exporter-otlp-proto-http==1.45.2 opentelemetry-exporter-prometheus==0.66b2
opentelemetry-proto==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2
orjson==3.13.0 packaging==25.0 pandas==3.1.1 peft==0.21.2 pillow==13.0.0 platformdirs==4.14.9
prometheus_client==0.26.0 propcache==0.5.4 proto-plus==1.29.0 protobuf==7.36.2 psutil==7.2.2
py-spy==0.4.3 pyarrow==26.0.1 pyasn1==0.6.5 pyasn1_modules==0.4.2 pybind11==3.1.0 pycparser==3.12
pydantic==2.14.4 pydantic_core==2.50.5 pylatexenc==2.11 python-dateutil==4.0.0
python-discovery==1.9.6 pyvers==0.1.0 referencing==0.37.0 regex==2026.11.19 requests==2.34.2
rich==15.0.0 rpds-py==2026.9.1 safetensors==0.8.0 setuptools==84.2.1 shellingham==1.5.4 six==1.17.0
smart_open==9.0.2 sniffio==1.3.1 sympy==1.14.0 tensorboard==2.21.0 tensorboard-data-server==0.7.2
tensordict==0.10.0 tokenizers==0.22.2 torchdata==0.11.0 tqdm==4.70.1 typer==0.29.2
typing-inspection==0.4.5 typing_extensions==4.16.0 tzdata==2026.6 urllib3==2.8.0
virtualenv==21.14.5 wandb==0.31.0 wrapt==2.5.2 xxhash==4.1.0 yarl==1.25.1 zipp==4.1.2
EOF
installed() {  # verl imports, and the project is this checkout's
  "$VPY" -I -c 'import pathlib, sys, verl, wmrl_envs
sys.exit(pathlib.Path(wmrl_envs.__file__).resolve().parents[1] != pathlib.Path.cwd().resolve())' >/dev/null 2>&1
}
key="$(printf '%s\n' "$PWD" "$("$VPY" -c 'import sys; print(sys.version)')" \
       | cat - scripts/setup_verl.sh pyproject.toml setup.py | sha256sum | cut -c1-16)"
marker="$VERL_VENV/.wmrl-setup.$key"
if [ ! -f "$marker" ] || ! installed; then
  pip=("$VPY" -m pip --disable-pip-version-check)
  report="$(mktemp)"; constraints="$(mktemp)"; trap 'rm -f "$report" "$constraints"' EXIT
  tr ' ' '\n' <<<"$PINS" | grep . >"$constraints"
  log "resolving ${requirements[*]}"
  "${pip[@]}" install -q -c "$constraints" --dry-run --report "$report" "${requirements[@]}"
  "$VPY" - "$report" <<'EOF'
import json, sys
chosen = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.load(open(sys.argv[1]))["install"]}
cuda = sorted(n for n in chosen if n.startswith(("nvidia-", "cuda-", "triton")))
torch = chosen.get("torch")
if cuda or (torch is not None and torch != "2.13.0+cpu"):
    sys.exit(f"[setup_verl] refusing: the resolution pulls torch {torch} and CUDA packages {cuda}")
EOF
  log "installing into $VERL_VENV"
  "${pip[@]}" install -q -c "$constraints" "${requirements[@]}"
  installed || { log "verl or this checkout does not import in $VERL_VENV"; "$VPY" -c 'import verl, wmrl_envs'; exit 1; }
  rm -f "$VERL_VENV"/.wmrl-setup.*
  touch "$marker"
fi
echo "$VPY"
