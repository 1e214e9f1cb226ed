#!/usr/bin/env bash
# Quick start, first command: install screeps-gitops into .venv and deploy the bundled example
# (examples/basic) to a local stand-in service that this starts and stops itself.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# Not editable: an editable install makes setuptools print a warning about it (the quick start stays quiet).
.venv/bin/python -m pip install -q '.[serve]'  # the stand-in that the demo deploys to
exec .venv/bin/gitops demo "$@"
