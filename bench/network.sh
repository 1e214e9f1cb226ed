#!/usr/bin/env bash
# The network benchmark (bench/bench_network.py): gitops against node-screeps-api's token-mode code.set through an
# emulated internet path (bench/netem.py) in front of the stand-in in official-server mode; both profiles of issue 23,
# and the first over TLS as the official server serves it (issue 40).
# Installs what it needs from the project's own files: .venv, the pinned peer (bench/peer/package*.json) into
# .bench/peer, and gitops as users get it (a regular install into .bench/gitops-venv, refreshed on every run).
# Usage: bash bench/network.sh [--rounds 5] [--warmup 1] [--servers 3] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/gitops ]; then
  [ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
  .venv/bin/python -m pip install -q -e '.[test]'
fi
if [ ! -x .bench/gitops-venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .bench/gitops-venv
fi
.bench/gitops-venv/bin/python -m pip install -q . >/dev/null 2>.bench/gitops-venv/pip.log \
  || { cat .bench/gitops-venv/pip.log >&2; exit 1; }
.bench/gitops-venv/bin/python -m pip install -q --no-deps --force-reinstall . >/dev/null 2>.bench/gitops-venv/pip.log \
  || { cat .bench/gitops-venv/pip.log >&2; exit 1; }
echo "== the emulated internet path: RTT 80 ms, 20 Mbit/s up, 100 Mbit/s down"
.venv/bin/python bench/bench_network.py --gitops "$PWD/.bench/gitops-venv/bin/gitops" "$@"
echo
echo "== a faster path: RTT 20 ms, 100 Mbit/s both ways"
.venv/bin/python bench/bench_network.py --gitops "$PWD/.bench/gitops-venv/bin/gitops" --rtt-ms 20 --up-mbit 100 \
  --down-mbit 100 --servers 1 "$@"
echo
echo "== over TLS (https://, TLS 1.3 served by the stand-in behind the path): RTT 80 ms, 20 Mbit/s up, 100 Mbit/s down"
.venv/bin/python bench/bench_network.py --gitops "$PWD/.bench/gitops-venv/bin/gitops" --tls "$@" --servers 1
