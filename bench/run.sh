#!/usr/bin/env bash
# Every benchmark, one after another, printing figures (loopback only, bounded in time).
# Usage: bash bench/run.sh   (after scripts/test.sh or scripts/demo.sh has made .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== bench/bench_deploy.py (plan/apply, 2,000 modules, 4.5 MB; gitops --help)"
.venv/bin/python bench/bench_deploy.py "$@"
echo
echo "== bench/bench_server.py (stand-in requests per second, 100-module branch)"
.venv/bin/python bench/bench_server.py
