# Sourced from the checkout's root by setup.sh, test.sh and main.sh: the one Python they all use.
# The active virtualenv when there is one, else this checkout's .venv (setup.sh creates it), so
# the system interpreter is never installed into.
PY="${VIRTUAL_ENV:-$PWD/.venv}/bin/python"
