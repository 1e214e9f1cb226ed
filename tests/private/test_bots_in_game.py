"""In game, on the real private server: what the tool deploys for real bot layouts loads with ``require`` in a tick.

A wrapped source map (module ``main.js.map`` holding ``module.exports = <map>;``) and a WebAssembly module named
without its suffix (``mybot_bg``, from ``mybot_bg.wasm`` with ``strip_suffixes: [".js", ".wasm"]``) are deployed by
``gitops apply`` with a password login; the player's ``main`` requires both and writes what it got to ``Memory``,
which is read back through ``GET /api/user/memory``.

Player code only runs when the driver cannot find its V8 snapshot (``build/runtime.snapshot.bin``): instead of
moving the shared installation's file, ``scripts/private-server.sh run`` (which the harness starts) preloads
``scripts/private-server/no_snapshot.js`` into every server process, which makes that one file look absent. A user's
code runs only while the user owns an object in the world: the admin CLI gives the fresh user a construction site
and marks it active.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.factories import git
from tests.private.harness import PrivateServer, PrivateServerError

pytestmark = pytest.mark.private_server

HERE = Path(__file__).resolve().parent
WASM_ADD = (HERE.parent.parent / "examples/rust-wasm/pkg/mybot_bg.wasm").read_bytes()
#: How long the world may take to run the player's code once (it ticks about once a second).
TICK_TIMEOUT = 60.0

MAIN = """\
'use strict';
const sourceMap = require('main.js.map');
const bytes = require('mybot_bg');
const add = new WebAssembly.Instance(new WebAssembly.Module(bytes), {}).exports.add;

module.exports.loop = function () {
    Memory.gitopsCheck = {mapVersion: sourceMap.version, mapFile: sourceMap.file, sum: add(20, 22), tick: Game.time};
};
"""


@pytest.fixture
def ticking_server() -> Iterator[PrivateServer]:
    """A private server of its own whose world ticks (the shared one is paused); it runs player code (see the
    module's docstring)."""
    with ticking() as server:
        yield server


@contextlib.contextmanager
def ticking() -> Iterator[PrivateServer]:
    """Start a private server whose world ticks and runs player code; stop it on exit, whatever happened."""
    for attempt in range(2):
        server = PrivateServer.start()
        if _ticks(server) or attempt == 1:
            break
        # On a loaded machine the world's processes can die while starting (seen with two suites at once): a
        # server whose game time never advances is replaced once, before the test relies on it.
        server.stop()
    try:
        server.wait_backend_settled()
        yield server
    finally:
        server.stop()


def _ticks(server: PrivateServer, within: float = 30.0) -> bool:
    """Whether the server's game time advances within ``within`` seconds (its engine runs)."""
    import time

    import httpx

    deadline = time.monotonic() + within
    first: int | None = None
    while time.monotonic() < deadline:
        try:
            now = server.http.get("/api/game/time", timeout=2.0).json().get("time")
        except (httpx.HTTPError, ValueError, PrivateServerError):
            return False  # refused or garbled: the server is gone (or its backend is restarting after a crash)
        if isinstance(now, int):
            if first is not None and now > first:
                return True
            first = now if first is None else first
        time.sleep(0.25)
    return False


def apply_in_game(
    server: PrivateServer, repo: Path, user: Any, tmp_path: Path, *, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``gitops apply --yes`` in ``repo`` as its own process, signed in as ``user`` (SCREEPS_USER/SCREEPS_PASSWORD),
    with a state folder and home of the test's own; a crash of the server's runner mid-apply is ridden out."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "SCREEPS_USER": user.username,
        "SCREEPS_PASSWORD": user.password,
        "GITOPS_STATE_DIR": str(tmp_path / "state"),
        "NO_COLOR": "1",
    }
    return server.run_riding_out_its_crash(
        lambda: subprocess.run(
            [sys.executable, "-m", "gitops", "apply", "--yes"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    )


def read_memory(server: PrivateServer, user: Any, path: str) -> Any:
    answer = user.call("GET", "/api/user/memory", params={"path": path})
    data = answer.get("data")
    if not data:
        return None
    assert data.startswith("gz:"), data
    return json.loads(gzip.decompress(base64.b64decode(data[3:])))


def test_a_wrapped_source_map_and_a_wasm_module_without_suffix_load_in_a_tick(
    ticking_server: PrivateServer, tmp_path: Path
) -> None:
    server = ticking_server
    user = server.register()
    repo = tmp_path / "bot"
    (repo / "dist").mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "dist/main.js").write_text(MAIN, encoding="utf-8")
    (repo / "dist/main.js.map").write_text('{"version":3,"file":"main.js","sources":[],"mappings":""}\n')
    (repo / "dist/mybot_bg.wasm").write_bytes(WASM_ADD)
    manifest = {
        "version": 1,
        "servers": {"home": {"url": user.url, "username_env": "SCREEPS_USER", "password_env": "SCREEPS_PASSWORD"}},
        "branches": [
            {
                "server": "home",
                "branch": "bots",
                "root": "dist",
                "include": ["*.js", "*.js.map", "*.wasm"],
                "naming": {"strip_suffixes": [".js", ".wasm"]},
                "activate": ["world"],
            }
        ],
    }
    (repo / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    done = apply_in_game(server, repo, user, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    held = user.code("bots")
    assert sorted(held) == ["main", "main.js.map", "mybot_bg"]

    # Make the user one whose code the runner runs: an object in the world, and active.
    give_world_object(server, user.username)

    deadline = time.monotonic() + TICK_TIMEOUT
    found = None
    while found is None and time.monotonic() < deadline:
        time.sleep(0.5)
        found = read_memory(server, user, "gitopsCheck")
    assert found is not None, f"the player's code did not run within {TICK_TIMEOUT:.0f} s\n{server.diagnosis()}"
    assert found["mapVersion"] == 3
    assert found["mapFile"] == "main.js"
    assert found["sum"] == 42
    assert found["tick"] > 0


HEALTHY_LOGGER = """\
'use strict';
module.exports.loop = function () {
    console.log('gitops healthy bot at tick ' + Game.time);
    Memory.loggedAt = Game.time;
};
"""


def give_world_object(server: PrivateServer, username: str) -> None:
    """Make ``username`` a user whose code the runner runs: an object in the world (a construction site), active."""
    user_id = server.cli(f"storage.db.users.findOne({{username: {json.dumps(username)}}}).then(u => u._id)")
    room = server.cli("storage.db.rooms.findOne({status: 'normal'}).then(r => r && r._id)")
    assert isinstance(user_id, str)
    assert isinstance(room, str), "the private server's world has no normal room"
    server.cli(
        "storage.db['rooms.objects'].insert({type: 'constructionSite', structureType: 'road', "
        f"room: {json.dumps(room)}, x: 25, y: 25, user: {json.dumps(user_id)}, progress: 0, progressTotal: 300}})"
        ".then(() => 1)"
    )
    server.cli(f"storage.db.users.update({{_id: {json.dumps(user_id)}}}, {{$set: {{active: 10000}}}})")


def test_a_bot_deployed_to_the_scripts_server_logs_in_game_and_verify_judges_it_healthy(
    ticking_server: PrivateServer, tmp_path: Path
) -> None:
    # Issue 39: on the server of scripts/private-server.sh (which the harness runs), a bot that only logs was judged
    # FAILING with the runtime's own `ReferenceError: _ is not defined`. The script now preloads no_snapshot.js.
    server = ticking_server
    user = server.register()
    give_world_object(server, user.username)
    repo = tmp_path / "bot"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "main.js").write_text(HEALTHY_LOGGER, encoding="utf-8")
    manifest = {
        "version": 1,
        "servers": {"home": {"url": user.url, "username_env": "SCREEPS_USER", "password_env": "SCREEPS_PASSWORD"}},
        "branches": [
            {
                "server": "home",
                "branch": "logger",
                "root": ".",
                "include": ["main.js"],
                "activate": ["world"],
                "verify": {"ticks": 3, "timeout": 60},
            }
        ],
    }
    (repo / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    done = apply_in_game(server, repo, user, tmp_path, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr + server.diagnosis()
    assert "verify home/logger: HEALTHY" in done.stderr + done.stdout, done.stdout + done.stderr
    assert "is not defined" not in done.stdout + done.stderr
    # Its code ran, past the line it logs: it wrote the tick to Memory.
    assert isinstance(read_memory(server, user, "loggedAt"), int)
