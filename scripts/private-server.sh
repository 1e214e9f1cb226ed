#!/usr/bin/env bash
# The real Screeps private server (npm `screeps` + `screepsmod-auth`), bound to loopback only.
#
# Usage: bash scripts/private-server.sh COMMAND [options]
#
#   install     Install the server into .private-server/ (idempotent: reused when already installed and current).
#   check       Exit 0 when the install is complete and current; otherwise say how to fix it and exit 1.
#   run         Run the server in the foreground (Ctrl-C stops it). Options:
#                 --data DIR       world data folder, created when missing (default .private-server/world)
#                 --port P         game/HTTP port on 127.0.0.1 (default $SCREEPS_PORT or 21025)
#                 --cli-port P     admin CLI port on 127.0.0.1 (default $SCREEPS_CLI_PORT or port+1)
#                 --watch-pid PID  stop the server's whole process group when process PID is gone
#   start       Run the server in the background (data in .private-server/world); wait until it answers.
#   stop        Stop the background server (its whole process group).
#   status      Say whether the background server runs, and where.
#   register USERNAME EMAIL
#               Register a user on the running server; the password is read from $SCREEPS_PASSWORD.
#
# Everything stays on 127.0.0.1: the server binds its game and CLI ports there, and a preload
# (scripts/private-server/loopback-guard.js) answers the Steam Web API call the backend makes at start and
# blocks any other connection or DNS lookup that would leave loopback. Only `install` uses the network
# (the npm registry). A second preload (scripts/private-server/no_snapshot.js) lets the server run player code.
# Versions are pinned in scripts/private-server/package.json and package-lock.json.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC="$ROOT/scripts/private-server"
# PRIVATE_SERVER_DIR moves the install elsewhere (the tests use it to check the "not installed" message).
PS=${PRIVATE_SERVER_DIR:-$ROOT/.private-server}
MARKER="$PS/.install-complete"
WORLD="$PS/world"
PIDFILE="$PS/server.pid"
GUARD="$SRC/loopback-guard.js"
# Without it the driver's broken V8 snapshot fails every tick of player code (docs/private-server-facts.md).
NO_SNAPSHOT="$SRC/no_snapshot.js"
INIT_DIST="$PS/node_modules/@screeps/launcher/init_dist"
LOOPBACK=127.0.0.1

die() {
  echo "private-server: $*" >&2
  exit 1
}

need_node() {
  command -v node >/dev/null 2>&1 || die "node is not on PATH; install Node.js 20 or newer."
  command -v npm >/dev/null 2>&1 || die "npm is not on PATH; install Node.js 20 or newer (it ships npm)."
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 20 ] || die "Node.js $major is too old; the server needs Node.js 20 or newer."
}

# What the install depends on: our pinned package files and the Node ABI that the native modules were built for.
stamp() {
  node -e '
    const crypto = require("crypto"), fs = require("fs");
    const h = crypto.createHash("sha256");
    for (const f of process.argv.slice(1)) h.update(fs.readFileSync(f));
    h.update(`${process.platform}-${process.arch}-abi${process.versions.modules}`);
    console.log(h.digest("hex"));
  ' "$SRC/package.json" "$SRC/package-lock.json"
}

# Empty output when the install is complete and current; otherwise the reason.
install_problem() {
  if [ ! -f "$MARKER" ]; then
    if [ -d "$PS/node_modules" ]; then
      echo "the install in $PS is incomplete (no completion marker)"
    else
      echo "the private server is not installed (no $PS)"
    fi
    return
  fi
  if [ "$(cat "$MARKER")" != "$(stamp)" ]; then
    echo "the install in $PS is stale (pinned versions or the Node.js version changed)"
    return
  fi
  # The install scripts build these; an npm that skipped them (or a failed build) leaves a server that won't run.
  local built
  for built in @screeps/driver/native/build/Release/native.node @screeps/driver/build/runtime.bundle.js; do
    if [ ! -f "$PS/node_modules/$built" ]; then
      echo "the install in $PS is broken (node_modules/$built was not built)"
      return
    fi
  done
  if ! (cd "$PS" && node -e 'require("isolated-vm"); require.resolve("screeps/bin/screeps.js"); require.resolve("screepsmod-auth")') \
    >/dev/null 2>&1; then
    echo "the install in $PS is broken (isolated-vm, screeps or screepsmod-auth does not load)"
  fi
}

cmd_check() {
  need_node
  local problem
  problem=$(install_problem)
  if [ -n "$problem" ]; then
    echo "private-server: $problem. Run: bash scripts/private-server.sh install" >&2
    exit 1
  fi
  echo "private-server: installed in $PS"
}

cmd_install() {
  need_node
  mkdir -p "$PS"
  if command -v flock >/dev/null 2>&1; then
    # Two installs in one checkout (parallel jobs) would trample each other's node_modules.
    exec 9>"$PS/.install.lock"
    flock 9
  fi
  local problem
  problem=$(install_problem)
  if [ -z "$problem" ]; then
    echo "private-server: reusing the install in $PS"
    return
  fi
  echo "private-server: installing screeps and screepsmod-auth into $PS ($problem) ..."
  local started=$SECONDS
  rm -f "$MARKER"
  cp "$SRC/package.json" "$SRC/package-lock.json" "$PS/"
  # isolated-vm has no prebuilt binary for every Node.js; build it (and the driver's native module) here.
  export npm_config_build_from_source=true
  # node-gyp needs Node's headers; use the installed ones instead of downloading them from nodejs.org.
  if [ -z "${npm_config_nodedir:-}" ] && [ "$(npm config get nodedir 2>/dev/null || true)" = "undefined" ]; then
    local prefix
    prefix=$(dirname "$(dirname "$(command -v node)")")
    if [ -f "$prefix/include/node/common.gypi" ]; then
      export npm_config_nodedir="$prefix"
    fi
  fi
  echo "private-server: npm ci builds isolated-vm and the driver from source: minutes on a small machine; a line every 30 s"
  # A ticker beside npm (npm stays in the foreground, so Ctrl-C and a CI timeout stop it as before); the ticker ends
  # with npm, or by itself once this script is gone.
  local parent=$$
  (
    waited=0
    while kill -0 "$parent" 2>/dev/null; do
      sleep 1
      waited=$((waited + 1))
      if [ $((waited % 30)) -eq 0 ]; then
        echo "private-server: still installing ($((waited)) s so far; log: $PS/install.log)"
      fi
    done
  ) &
  local ticker=$!
  local npm_status=0
  (cd "$PS" && npm ci --no-audit --no-fund --engine-strict=false --loglevel=warn </dev/null >"$PS/install.log" 2>&1) ||
    npm_status=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  if [ "$npm_status" -ne 0 ]; then
    tail -n 60 "$PS/install.log" >&2
    die "npm ci failed (full log: $PS/install.log)."
  fi
  if ! (cd "$PS" && node -e 'require("isolated-vm")') >>"$PS/install.log" 2>&1; then
    tail -n 30 "$PS/install.log" >&2
    die "isolated-vm was installed but does not load (full log: $PS/install.log)."
  fi
  stamp >"$MARKER.tmp"
  mv "$MARKER.tmp" "$MARKER"
  echo "private-server: installed in $((SECONDS - started)) s"
}

require_installed() {
  local problem
  problem=$(install_problem)
  [ -z "$problem" ] || die "$problem. Run: bash scripts/private-server.sh install"
}

# Write a world folder non-interactively (what `screeps init` does, minus its Steam key prompt).
prepare_world() {
  local dir=$1
  mkdir -p "$dir/logs"
  [ -f "$dir/db.json" ] || cp "$INIT_DIST/db.json" "$dir/db.json"
  [ -f "$dir/steam_appid.txt" ] || printf '464350' >"$dir/steam_appid.txt"
  if [ ! -f "$dir/.screepsrc" ]; then
    cat >"$dir/.screepsrc" <<EOF
; Written by scripts/private-server.sh. The Steam key is a dummy: the call it would make is stubbed
; (scripts/private-server/loopback-guard.js), and users sign in with screepsmod-auth passwords instead.
steam_api_key = screeps-gitops-dummy-key
host = $LOOPBACK
port = 21025
cli_host = $LOOPBACK
cli_port = 21026
password =
runners_cnt = 1
runner_threads = 1
processors_cnt = 1
logdir = logs
modfile = mods.json
assetdir = $INIT_DIST/assets
db = db.json
log_console = false
log_rotate_keep = 2
storage_disabled = false
restart_interval = 3600

[auth]
registerCpu = 100
EOF
  fi
  if [ ! -f "$dir/mods.json" ]; then
    cat >"$dir/mods.json" <<EOF
{
  "mods": ["$PS/node_modules/screepsmod-auth"],
  "bots": {"simplebot": "$INIT_DIST/node_modules/@screeps/simplebot/src"}
}
EOF
  fi
}

cmd_run() {
  need_node
  local data=$WORLD port=${SCREEPS_PORT:-21025} cli_port=${SCREEPS_CLI_PORT:-} watch_pid=""
  while [ $# -gt 0 ]; do
    case $1 in
      --data) data=$2; shift 2 ;;
      --port) port=$2; shift 2 ;;
      --cli-port) cli_port=$2; shift 2 ;;
      --watch-pid) watch_pid=$2; shift 2 ;;
      *) die "run: unknown option $1" ;;
    esac
  done
  [ -n "$cli_port" ] || cli_port=$((port + 1))
  require_installed
  mkdir -p "$data"
  data=$(cd "$data" && pwd)
  prepare_world "$data"
  cd "$data"
  # `start` runs us under setsid and wants our pid, which is the process group id once we exec node.
  [ -z "${PRIVATE_SERVER_PIDFILE:-}" ] || echo "$$" >"$PRIVATE_SERVER_PIDFILE"
  if [ -n "$watch_pid" ]; then
    # When the test process dies without cleaning up (SIGKILL), take the whole process group down with it.
    (
      while kill -0 "$watch_pid" 2>/dev/null; do sleep 1; done
      kill -TERM 0
    ) &
  fi
  export NODE_OPTIONS="--require \"$GUARD\" --require \"$NO_SNAPSHOT\" ${NODE_OPTIONS:-}"
  exec node "$PS/node_modules/screeps/bin/screeps.js" start \
    --host "$LOOPBACK" --port "$port" --cli_host "$LOOPBACK" --cli_port "$cli_port"
}

running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid=$(cat "$PIDFILE")
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

cmd_start() {
  need_node
  require_installed
  local port=${SCREEPS_PORT:-21025} pid
  if pid=$(running_pid); then
    echo "private-server: already running (process group $pid) on http://$LOOPBACK:$port"
    return
  fi
  command -v setsid >/dev/null 2>&1 || die "setsid (util-linux) is needed to start the server in the background."
  mkdir -p "$WORLD"
  rm -f "$PIDFILE"
  PRIVATE_SERVER_PIDFILE=$PIDFILE setsid bash "$0" run --data "$WORLD" --port "$port" \
    </dev/null >"$PS/server.log" 2>&1 &
  local deadline=$((SECONDS + 120))
  until [ -s "$PIDFILE" ] || [ $SECONDS -ge $deadline ]; do sleep 0.1; done
  pid=$(cat "$PIDFILE" 2>/dev/null) || die "the server did not start; see $PS/server.log."
  until node -e '
      fetch(process.argv[1]).then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1));
    ' "http://$LOOPBACK:$port/api/version" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
      tail -n 20 "$PS/server.log" "$WORLD"/logs/backend.log 2>/dev/null >&2 || true
      cmd_stop >/dev/null 2>&1 || true
      die "the server did not answer on http://$LOOPBACK:$port/api/version."
    fi
    sleep 0.5
  done
  echo "$port" >"$PS/server.port"
  echo "private-server: running on http://$LOOPBACK:$port (process group $pid; data in $WORLD)"
  echo "private-server: stop it with: bash scripts/private-server.sh stop"
}

cmd_stop() {
  local pid
  if ! pid=$(running_pid); then
    rm -f "$PIDFILE"
    echo "private-server: not running"
    return
  fi
  kill -TERM -- "-$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 10))
  while kill -0 -- "-$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$PIDFILE" "$PS/server.port"
  echo "private-server: stopped"
}

cmd_status() {
  local pid
  if pid=$(running_pid); then
    echo "private-server: running (process group $pid) on http://$LOOPBACK:$(cat "$PS/server.port" 2>/dev/null || echo "?")"
  else
    echo "private-server: not running"
    exit 1
  fi
}

cmd_register() {
  [ $# -eq 2 ] || die "usage: SCREEPS_PASSWORD=... bash scripts/private-server.sh register USERNAME EMAIL"
  [ -n "${SCREEPS_PASSWORD:-}" ] || die "set SCREEPS_PASSWORD to the new user's password."
  need_node
  node -e '
    const [url, username, email] = process.argv.slice(1);
    fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
                body: JSON.stringify({username, email, password: process.env.SCREEPS_PASSWORD})})
      .then(r => r.json())
      .then(b => {
        if (b.ok === 1) { console.log(`private-server: registered ${username}`); return; }
        console.error(`private-server: registration refused: ${String(b.error).split("\n")[0]}`);
        process.exit(1);
      }, e => { console.error(`private-server: ${e.message} (is the server running?)`); process.exit(1); });
  ' "http://$LOOPBACK:${SCREEPS_PORT:-$(cat "$PS/server.port" 2>/dev/null || echo 21025)}/api/register/submit" "$1" "$2"
}

command=${1:-}
[ $# -eq 0 ] || shift
case $command in
  install) cmd_install "$@" ;;
  check) cmd_check "$@" ;;
  run) cmd_run "$@" ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  status) cmd_status "$@" ;;
  register) cmd_register "$@" ;;
  *)
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    [ -z "$command" ] || exit 2
    ;;
esac
