#!/usr/bin/env bash
# The GitHub Action's install step, timed here: uv vs pip, cold cache vs warm cache, median of N runs.
#
#   bash bench/action_install.sh [RUNS]     # default 5 runs per case; prints one line per case
#
# uv: the install step's own script, taken from action.yml and run by bash as the runner runs it (uv venv;
#     uv pip install --require-hashes -r requirements/action.lock; the action's folder put on the path by a .pth).
# pip: the same with python -m venv and pip install --require-hashes (what the step did before, less the build of
#     the package itself).
# "cold": an empty package cache (a runner with no cache entry); "warm": the cache a first run filled (the entry
# that actions/cache restores, keyed on the lock and the Python version). Each run gets a fresh virtual environment.
# pip and uv read no configuration file (PIP_CONFIG_FILE=/dev/null, UV_NO_CONFIG=1): the packages come from the
# public index, as on a runner. A run that prints anything (a warning) stops the benchmark. Needs uv: on PATH,
# or UV=/path/to/uv (pip install uv).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
ROOT=$(pwd)
LOCK="$ROOT/requirements/action.lock"
PY=${PYTHON:-python3}
UV=${UV:-$(command -v uv || true)}
[ -n "$UV" ] || { echo "uv is needed: pip install uv (or set UV=/path/to/uv)" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PIP_CONFIG_FILE=/dev/null UV_NO_CONFIG=1 PIP_DISABLE_PIP_VERSION_CHECK=1
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL UV_INDEX_URL UV_EXTRA_INDEX_URL

STEP="$WORK/install-step.sh"
"$ROOT/.venv/bin/python" -c '
import sys, yaml
steps = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))["runs"]["steps"]
print(next(s["run"] for s in steps if s.get("id") == "install"))' "$ROOT/action.yml" > "$STEP"

install_uv() {  # $1 venv's parent, $2 cache: action.yml's install step (it makes the venv in a folder of $1)
  : > "$WORK/output"
  mkdir -p "$1"
  PYTHON=$(command -v "$PY") UV="$UV" ACTION_PATH="$ROOT" VENV_PARENT="$1" UV_CACHE_DIR="$2" \
    UV_PYTHON_DOWNLOADS=never UV_NO_CONFIG=1 GITHUB_OUTPUT="$WORK/output" GITHUB_ACTION_PATH="$ROOT" \
    GITHUB_WORKSPACE="$ROOT" RUNNER_TEMP="$WORK" bash --noprofile --norc -eo pipefail "$STEP"
}

install_pip() {
  "$PY" -m venv "$1"
  PIP_CACHE_DIR="$2" "$1/bin/python" -m pip install --quiet --require-hashes -r "$LOCK"
  site=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '%s\n' "$ROOT" > "$site/screeps_gitops_action.pth"
}

# One timed run: prints seconds; the log must be empty (no warnings) and the tool must start.
timed() {  # $1 tool, $2 venv, $3 cache
  local start end log="$WORK/log"
  start=$(date +%s.%N)
  "install_$1" "$2" "$3" >"$log" 2>&1
  end=$(date +%s.%N)
  if [ -s "$log" ]; then echo "install_$1 printed:" >&2; cat "$log" >&2; exit 1; fi
  local python="$2/bin/python"
  [ "$1" = pip ] || python=$(echo "$2"/screeps-gitops-*/venv/bin/python)
  (cd "$WORK" && "$python" -I -m gitops --version >/dev/null)
  echo "$end - $start" | bc
}

median() { sort -n | awk '{ a[NR] = $1 } END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.2f", m }'; }

for tool in uv pip; do
  for state in cold warm; do
    times=()
    for i in $(seq 1 "$RUNS"); do
      cache="$WORK/cache-$tool-$state-$i"
      if [ "$state" = warm ]; then
        cache="$WORK/cache-$tool-warm"
        [ -d "$cache" ] || "install_$tool" "$WORK/prime-$tool" "$cache" >/dev/null 2>&1
      fi
      times+=("$(timed "$tool" "$WORK/venv-$tool-$state-$i" "$cache")")
    done
    printf '%-4s %-5s median %6s s  (runs: %s)\n' "$tool" "$state" "$(printf '%s\n' "${times[@]}" | median)" "${times[*]}"
  done
done
