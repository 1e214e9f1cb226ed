#!/usr/bin/env bash
# Quick start, first command: install screeps-gitops into .venv and deploy the bundled example
# (examples/basic) to a local stand-in service that this starts and stops itself.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# One line per step that can take more than a few seconds, so a first run never looks stuck.
step() { echo "demo.sh: $* ($(date +%H:%M:%S))" >&2; }
if [ ! -x .venv/bin/python ]; then
  step "creating the virtual environment .venv"
  "$PY" -m venv .venv
fi
step "updating pip"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
step "installing screeps-gitops with the stand-in (about a minute the first time, seconds after)"
# Not editable: an editable install makes setuptools print a warning about it (the quick start stays quiet).
.venv/bin/python -m pip install -q '.[serve]'  # the stand-in that the demo deploys to
step "deploying examples/basic to a local stand-in"
exec .venv/bin/gitops demo "$@"
