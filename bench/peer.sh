#!/usr/bin/env bash
# The side-by-side benchmark: `gitops apply` against node-screeps-api's `code.set` on the real npm private server
# (bench/bench_peer.py; about 2-3 minutes with the defaults). Installs what it needs from the project's own files:
# .venv (pip install -e '.[serve]'), the private server (scripts/private-server.sh install, reused when current) unless
# PRIVATE_SERVER_DIR points at an install made elsewhere, and the pinned peer (bench/peer/package*.json) into .bench/.
# gitops is measured as users get it: a regular (non-editable) install of this tree into .bench/gitops-venv,
# refreshed on every run (an editable install adds ~20 ms of import hook to every start).
# Usage: bash bench/peer.sh [--rounds 6] [--warmup 1] [--modules 2000] [--total-mb 4.5] [--json] [--no-floor]
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/gitops ]; then
  [ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
  .venv/bin/python -m pip install -q -e '.[serve]'  # the stand-in the benchmarks run
fi
if [ -n "${PRIVATE_SERVER_DIR:-}" ]; then
  # An install someone else owns: use it as it is, never reinstall it from here.
  bash scripts/private-server.sh check
else
  bash scripts/private-server.sh install
fi
# The regular install: dependencies once, this tree's package every run (quietly; pip's index notices dropped).
if [ ! -x .bench/gitops-venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .bench/gitops-venv
fi
.bench/gitops-venv/bin/python -m pip install -q . >/dev/null 2>.bench/gitops-venv/pip.log \
  || { cat .bench/gitops-venv/pip.log >&2; exit 1; }
.bench/gitops-venv/bin/python -m pip install -q --no-deps --force-reinstall . >/dev/null 2>.bench/gitops-venv/pip.log \
  || { cat .bench/gitops-venv/pip.log >&2; exit 1; }
.venv/bin/python bench/bench_peer.py --gitops "$PWD/.bench/gitops-venv/bin/gitops" "$@"
