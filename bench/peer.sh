#!/usr/bin/env bash
# The side-by-side benchmark: `gitops apply` against node-screeps-api's `code.set` on the real npm private server
# (bench/bench_peer.py; about 2-3 minutes with the defaults). Installs what it needs from the project's own files:
# .venv (pip install -e .), the private server (scripts/private-server.sh install, reused when current) unless
# PRIVATE_SERVER_DIR points at an install made elsewhere, and the pinned peer (bench/peer/package*.json) into .bench/.
# Usage: bash bench/peer.sh [--rounds 6] [--warmup 1] [--modules 2000] [--total-mb 4.5] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/gitops ]; then
  [ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
  .venv/bin/python -m pip install -q -e .
fi
if [ -n "${PRIVATE_SERVER_DIR:-}" ]; then
  # An install someone else owns: use it as it is, never reinstall it from here.
  bash scripts/private-server.sh check
else
  bash scripts/private-server.sh install
fi
.venv/bin/python bench/bench_peer.py "$@"
