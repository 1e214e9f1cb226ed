#!/usr/bin/env bash
# Every benchmark, one after another, printing figures (loopback only, bounded in time; 2 to 5 minutes on 2 cores).
# Usage: bash bench/run.sh [bench_deploy.py options]
# Installs what it needs from the project's own files (.venv; the private server and the peer via bench/peer.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/gitops ]; then
  [ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
  .venv/bin/python -m pip install -q -e '.[serve]'  # the stand-in the benchmarks run
fi
echo "== bench/bench_deploy.py (plan/apply, 2,000 modules, 4.5 MB; gitops --help)"
.venv/bin/python bench/bench_deploy.py "$@"
echo
echo "== bench/bench_server.py (stand-in requests per second, 100-module branch)"
.venv/bin/python bench/bench_server.py
echo
echo "== bench/peer.sh (gitops apply vs node-screeps-api code.set on the real private server)"
bash bench/peer.sh
