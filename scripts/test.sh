#!/usr/bin/env bash
# Install everything the test suite needs from the project's own files, then run ruff, mypy and pytest.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# Headless Chromium for the no-rate-limit page tests (Debian's package; Playwright drives it, downloads nothing).
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

# The real npm private server (screeps + screepsmod-auth) for the integration suite; reused when present.
if [ -x scripts/private-server.sh ]; then
  bash scripts/private-server.sh install
fi

echo "== ruff"
.venv/bin/ruff check gitops tests bench
.venv/bin/ruff format --check gitops tests bench
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
.venv/bin/python -m pytest "$@"
