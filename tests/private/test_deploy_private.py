"""The tool end to end against the real npm private server (screeps + screepsmod-auth): plan, apply, branch
creation, activation and module removal with a password login, checked through the server's own API."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.factories import git
from tests.private.harness import ServerUser

BOT = {
    "main.js": "const harvester = require('role/harvester');\nmodule.exports.loop = () => harvester.run();\n",
    "role/harvester.js": "module.exports.run = () => {};\n",
    "util/names.js": "module.exports.name = (n) => 'creep-' + n;\n",
}
WASM = b"\x00asm\x01\x00\x00\x00"


@dataclass
class Run:
    code: int
    out: str
    err: str


class Player:
    """A player's repository deploying to the private server with user name and password, the CLI as a process."""

    def __init__(self, root: Path, user: ServerUser) -> None:
        self.root = root
        self.user = user
        root.mkdir(parents=True)
        git(root, "init", "-q")
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(root.parent),
            "SCREEPS_USER": user.username,
            "SCREEPS_PASSWORD": user.password,
            "GITOPS_STATE_DIR": str(root.parent / "state"),
            "NO_COLOR": "1",
        }

    def manifest(self, branches: list[dict[str, object]]) -> None:
        data = {
            "version": 1,
            "servers": {
                "home": {"url": self.user.url, "username_env": "SCREEPS_USER", "password_env": "SCREEPS_PASSWORD"}
            },
            "branches": [{"server": "home", "root": "src", **b} for b in branches],
        }
        (self.root / "gitops.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")

    def write(self, files: dict[str, str | bytes]) -> None:
        for name, content in files.items():
            path = self.root / "src" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")

    def gitops(self, *args: str) -> Run:
        done = subprocess.run(
            [sys.executable, "-m", "gitops", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        for text in (done.stdout, done.stderr):
            assert self.user.password not in text
        return Run(done.returncode, done.stdout, done.stderr)

    def plan_json(self, refresh: str = "always") -> tuple[int, dict[str, Any]]:
        run = self.gitops("plan", "--json", f"--refresh={refresh}")
        assert run.code in (0, 2), run.err
        return run.code, json.loads(run.out)


@pytest.fixture
def player(tmp_path: Path, private_user: ServerUser) -> Player:
    p = Player(tmp_path / "bot", private_user)
    p.write({**BOT, "lib/tiny.wasm": WASM})
    p.manifest([{"branch": "deploy", "include": ["**/*.js", "**/*.wasm"], "activate": ["world", "sim"]}])
    return p


def test_first_deploy_creates_activates_and_uploads(player: Player) -> None:
    user = player.user
    assert user.branch_names() == ["default"]
    code, doc = player.plan_json()
    assert code == 2
    [branch] = doc["branches"]
    assert branch["action"] == "create"
    assert (doc["budget"], doc["not_rate_limited"]) == ([], ["home"])
    assert branch["added"] == ["lib/tiny.wasm", "main", "role/harvester", "util/names"]
    # Created holding its modules (clone-branch with defaultModules): no code upload at all.
    assert branch["requests"] == [
        "POST /api/user/clone-branch",
        "POST /api/user/set-active-branch",
        "POST /api/user/set-active-branch",
    ]
    assert doc["uploads_needed"] == 0

    run = player.gitops("apply", "--yes")
    assert run.code == 0, run.err
    assert sorted(user.branch_names()) == ["default", "deploy"]
    assert user.active_branch("activeWorld") == "deploy"
    assert user.active_branch("activeSim") == "deploy"
    held = user.code("deploy")
    assert held["main"] == BOT["main.js"]
    assert held["role/harvester"] == BOT["role/harvester.js"]
    assert base64.b64decode(held["lib/tiny.wasm"]["binary"]) == WASM

    # The same code again: nothing to do, as the server's own download shows.
    assert player.gitops("plan", "--refresh=always").code == 0
    # And as its branch list shows, which carries each branch's modules: verified without a download.
    code, doc = player.plan_json("auto")
    assert code == 0
    assert (doc["verified"], doc["branches"][0]["remote"]["basis"]) == (True, "branch-list")


def test_an_edit_in_the_game_is_seen_at_once(player: Player) -> None:
    assert player.gitops("apply", "--yes").code == 0
    held = player.user.code("deploy")
    player.user.upload("deploy", {**held, "main": "// edited in the game\n"})
    code, doc = player.plan_json("auto")  # within the trust window of the tool's own create
    assert code == 2
    assert (doc["branches"][0]["action"], doc["branches"][0]["changed"]) == ("update", ["main"])


def test_changed_and_removed_modules(player: Player) -> None:
    assert player.gitops("apply", "--yes").code == 0
    (player.root / "src" / "util" / "names.js").unlink()
    player.write({"role/harvester.js": "module.exports.run = () => 'harder';\n"})
    code, doc = player.plan_json()
    assert code == 2
    [branch] = doc["branches"]
    assert (branch["action"], branch["changed"], branch["removed"]) == ("update", ["role/harvester"], ["util/names"])
    run = player.gitops("apply", "--yes")
    assert run.code == 0, run.err
    held = player.user.code("deploy")
    assert "util/names" not in held
    assert held["role/harvester"] == "module.exports.run = () => 'harder';\n"
    assert player.gitops("plan", "--refresh=always").code == 0


def test_wrong_password_is_one_clear_error(player: Player) -> None:
    player.env["SCREEPS_PASSWORD"] = "not-the-password"
    run = player.gitops("plan")
    assert run.code == 7
    assert run.err.startswith("Error: ")
    assert "Traceback" not in run.err
    assert "not-the-password" not in run.err + run.out


def test_adopting_a_bot_from_the_private_server_round_trips_to_a_verified_no_changes(
    tmp_path: Path, private_user: ServerUser
) -> None:
    """init asks the real server's /api/version, names a user and a password, downloads first, writes a manifest
    that reads every module back (a map as rollup-plugin-screeps uploads it, a binary module without a suffix,
    names with '/'), pulls, and the next plan is a verified "No changes"."""
    the_map = '{"version":3,"sources":["../src/main.ts"],"mappings":"AAAA"}'
    private_user.upload(
        "default",
        {
            "main": "const h = require('role/harvester');\nmodule.exports.loop = () => h.run();\n",
            "role/harvester": "module.exports.run = () => {};\n",
            "main.js.map": f"module.exports = {the_map};",
            "addTwo": {"binary": base64.b64encode(WASM).decode("ascii")},
        },
    )
    p = Player(tmp_path / "bot", private_user)
    p.env["SCREEPS_USERNAME"] = private_user.username
    init = p.gitops("init", "--server", private_user.url, "--pull")
    assert init.code == 0, init.err
    assert "the server answers /api/version as a private server" in init.out
    assert "should say: No changes" in init.out
    server = yaml.safe_load((p.root / "gitops.yaml").read_text(encoding="utf-8"))["servers"]["local"]
    assert (server["username_env"], server["password_env"]) == ("SCREEPS_USERNAME", "SCREEPS_PASSWORD")
    assert (p.root / "src/main.js.map").read_text(encoding="utf-8") == the_map
    assert (p.root / "src/addTwo").read_bytes() == WASM
    code, plan = p.plan_json()
    assert code == 0, plan
    assert plan["verified"] is True, plan["branches"]
