#!/usr/bin/env bash
# Install everything the test suite needs from the project's own files, then run ruff, mypy and pytest.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
# One line per step that can take more than a few seconds (the first run installs for minutes).
step() { echo "== $* ($(date +%H:%M:%S))"; }
if [ ! -x .venv/bin/python ]; then
  step "creating the virtual environment .venv"
  "$PY" -m venv .venv
fi
step "installing screeps-gitops and its test tools into .venv (a minute or two the first time)"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# Headless Chromium for the no-rate-limit page tests (Debian's package; Playwright drives it, downloads nothing).
if ! command -v chromium >/dev/null 2>&1; then
  step "installing Debian's chromium for the page tests (once)"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

# The real npm private server (screeps + screepsmod-auth) for the integration suite; reused when present.
if [ -x scripts/private-server.sh ]; then
  step "the real private server for the integration tests (installed once, a few minutes; reused after)"
  bash scripts/private-server.sh install
fi

echo "== ruff"
.venv/bin/ruff check gitops tests bench
.venv/bin/ruff format --check gitops tests bench
echo "== mypy"
.venv/bin/mypy
echo "== pytest tests/core tests/render tests/edges/test_planfile.py tests/app/test_scaffold.py (the pure modules' own tests must cover 90% of each)"
# A quick run of its own, before the full suite, so that a coverage drop fails CI by itself. The step is the unit
# tests of the pure modules listed below, each in the folder that mirrors its package (tests mirror gitops/): the
# core's (tests/core), the renderers' (tests/render), the saved plan file's (tests/edges/test_planfile.py) and init's
# manifest text's (app/scaffold.py, pure: tests/app/test_scaffold.py); no server, no subprocess, seconds. The
# progress display's tests wait on a slow stand-in for seconds and test none of these modules: the full run has them.
COVERAGE_FILE=.venv/.coverage-core .venv/bin/python -m pytest -q -p no:cacheprovider tests/core tests/render \
  tests/edges/test_planfile.py tests/app/test_scaffold.py --ignore=tests/render/test_progress.py \
  --cov=gitops.core.plan --cov=gitops.core.planbuild --cov=gitops.core.planseal \
  --cov=gitops.render.plan --cov=gitops.edges.planfile --cov=gitops.core.diff --cov=gitops.core.budget \
  --cov=gitops.core.codeset --cov=gitops.core.apply \
  --cov=gitops.core.layout --cov=gitops.core.layoutdetect --cov=gitops.core.buildlayouts --cov=gitops.core.readback \
  --cov=gitops.core.naming --cov=gitops.core.pull --cov=gitops.app.scaffold \
  --cov=gitops.core.pace --cov=gitops.core.drift --cov=gitops.render.drift --cov=gitops.core.remote --cov=gitops.core.protected \
  --cov-report=term-missing:skip-covered --cov-fail-under=90
# --cov-fail-under checks the total; each module must reach 90% on its own too.
for module in core/plan core/planbuild core/planseal render/plan edges/planfile core/diff core/budget core/codeset \
  core/apply core/layout core/layoutdetect core/buildlayouts core/readback core/naming core/pull app/scaffold \
  core/pace core/drift render/drift core/remote core/protected; do
  COVERAGE_FILE=.venv/.coverage-core .venv/bin/python -m coverage report --include="gitops/$module.py" \
    --fail-under=90 >/dev/null || { echo "gitops/$module.py: under 90% line coverage by the unit tests of this step" >&2; exit 1; }
done
step "pytest tests/installed: what ships (the sdist, the wheel built from it, installed into a fresh venv, every command run from outside the clone)"
# Its own step, one process, named by path (a plain pytest run leaves it out): the build and the install are shared by
# its tests (75-90 s on this 2-core machine while 8 other suites ran).
.venv/bin/python -m pytest -q -p no:cacheprovider -n 0 tests/installed
step "pytest"
# Two worker processes (pytest-xdist; GITOPS_TEST_WORKERS=0 runs in this process): much of the suite waits on servers,
# subprocesses and ticks, so two workers take about half the wall time of one on two cores.
.venv/bin/python -m pytest -n "${GITOPS_TEST_WORKERS:-2}" "$@"  # without tests/installed (pyproject's norecursedirs)
