"""Verified rollout on the real private server with its world ticking (issue 22's "done means").

A bot that logs and writes ``Memory`` every tick is deployed; then a bot that throws every tick is deployed with
``verify`` and ``on_failure: rollback``: apply reports failing with the game's own error text, undoes the deploy
(``restore``: the previous code uploaded again; ``standby``: the previous branch activated again), and the previous
bot is seen running again (its ``Memory``). A healthy bot is reported healthy with the ticks observed. The game
socket is the real ``@screeps/backend`` one, authenticated with the password login's token.

How the world is made to run player code: see ``test_bots_in_game.py`` (the no-snapshot preload, a construction
site and ``active`` for the fresh user).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.factories import git
from tests.private.harness import PrivateServer, ServerUser
from tests.private.test_bots_in_game import give_world_object, read_memory, ticking_server  # noqa: F401 (the fixture)

TICK_TIMEOUT = 60.0

GOOD = """\
module.exports.loop = function () {
    Memory.who = '%s';
    Memory.tick = Game.time;
    console.log('%s alive at ' + Game.time);
};
"""
BAD = """\
module.exports.loop = function () {
    const creep = null;
    creep.moveTo(25, 25);
};
"""


def activate_user(server: PrivateServer, user: ServerUser) -> None:
    """Give ``user`` an object in the world and mark it active: from then on the world runs its code."""
    give_world_object(server, user.username)


class Bot:
    def __init__(self, server: PrivateServer, user: ServerUser, tmp_path: Path, verify: dict[str, Any]) -> None:
        self.server, self.user, self.tmp = server, user, tmp_path
        self.repo = tmp_path / "bot"
        (self.repo / "src").mkdir(parents=True)
        git(self.repo, "init", "-q")
        self.verify = verify
        #: The server's address in the manifest (a relay in front of the server, say).
        self.url = user.url

    def deploy(self, code: str, *, verify: bool) -> tuple[int, dict[str, Any], str]:
        self.write(code, verify=verify)
        done = self.gitops("apply", "--yes", "--json")
        return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}, done.stderr

    def write(self, code: str, *, verify: bool) -> None:
        """Write the bot's code and its manifest (the server at :attr:`url`)."""
        (self.repo / "src/main.js").write_text(code, encoding="utf-8")
        branch: dict[str, Any] = {"server": "home", "branch": "bots", "root": "src", "activate": ["world"]}
        if verify:
            branch["verify"] = self.verify
        manifest = {
            "version": 1,
            "servers": {"home": {"url": self.url, "username_env": "SCREEPS_USER", "password_env": "SCREEPS_PASSWORD"}},
            "branches": [branch],
        }
        (self.repo / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")

    def env(self) -> dict[str, str]:
        """The environment of a ``gitops`` run: the user's password login, the state folder in the test's tmp."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.tmp),
            "SCREEPS_USER": self.user.username,
            "SCREEPS_PASSWORD": self.user.password,
            "GITOPS_STATE_DIR": str(self.tmp / "state"),
            "NO_COLOR": "1",
        }

    def gitops(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``gitops ARGS`` in the bot's repository, signed in with the user's password (never in the output)."""
        env = self.env()
        done = self.server.run_riding_out_its_crash(
            lambda: subprocess.run(
                [sys.executable, "-m", "gitops", *args],
                cwd=self.repo,
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
        )
        assert self.user.password not in done.stdout + done.stderr
        return done

    def wait_running(self, who: str, after: int = 0) -> int:
        """The tick at which ``who`` wrote Memory, once it has done so after tick ``after``."""
        deadline = time.monotonic() + TICK_TIMEOUT
        while time.monotonic() < deadline:
            if read_memory(self.server, self.user, "who") == who:
                tick = read_memory(self.server, self.user, "tick")
                if isinstance(tick, int) and tick > after:
                    return tick
            time.sleep(0.5)
        raise AssertionError(f"{who} did not run within {TICK_TIMEOUT:.0f} s\n{self.server.diagnosis()}")


def _check_failing(doc: dict[str, Any], action: str) -> None:
    [verify] = doc["verify"]
    assert verify["result"] == "rolled-back", verify
    assert verify["action"] == action
    evidence = verify["health"]["evidence"]
    assert evidence, verify
    assert evidence[0].startswith("TypeError: Cannot read propert"), evidence  # the game's own text
    assert "main:3" in evidence[0]  # and its place in the bot's code
    assert verify["after"]["status"] == "healthy", verify


def test_restore_and_healthy_on_the_real_server(
    ticking_server: PrivateServer,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    server = ticking_server
    user = server.register()
    bot = Bot(server, user, tmp_path, {"ticks": 3, "timeout": 60, "on_failure": "rollback"})
    code, _doc, err = bot.deploy(GOOD % ("v1", "v1"), verify=False)
    assert code == 0, err + "\n" + server.diagnosis()
    activate_user(server, user)
    bot.wait_running("v1")

    code, doc, err = bot.deploy(BAD, verify=True)
    assert code == 10, err
    _check_failing(doc, "restored")
    assert doc["verify"][0]["health"]["bot_frame"] == "main:3"  # the game's stack, read: the bot's own frame
    assert user.code("bots") == {"main": GOOD % ("v1", "v1")}
    tick = read_memory(server, user, "tick")
    bot.wait_running("v1", after=tick if isinstance(tick, int) else 0)
    # Issue 39: the outcome lasts in the ledger, and status reads it beside the server's own branch list.
    status = bot.gitops("status", "--json")
    assert status.returncode == 0, status.stderr
    [row] = json.loads(status.stdout)["branches"]
    assert (row["branch"], row["active"], row["verification"]["state"]) == ("bots", ["world"], "rolled-back")

    code, doc, err = bot.deploy(GOOD % ("v2", "v2"), verify=True)
    assert code == 0, err + "\n" + server.diagnosis()
    [verify] = doc["verify"]
    assert verify["result"] == "healthy"
    assert verify["health"]["ticks_seen"] == 3
    bot.wait_running("v2")

    # A manual undo on request, through the same plan and apply (and verify) as any deploy.
    history = json.loads(bot.gitops("history", "--json").stdout)["servers"]["home"]
    assert [(d["n"], d["how"], d["state"]) for d in history] == [
        (3, "apply", "healthy"),
        (2, "apply", "rolled-back"),
        (1, "apply", None),
    ]
    back = bot.gitops("rollback", "--to", "1", "--yes")
    assert back.returncode == 0, back.stdout + back.stderr + "\n" + server.diagnosis()
    assert "verify home/bots: HEALTHY" in back.stdout
    assert user.code("bots") == {"main": GOOD % ("v1", "v1")}
    tick = read_memory(server, user, "tick")
    bot.wait_running("v1", after=tick if isinstance(tick, int) else 0)


def test_standby_on_the_real_server(
    ticking_server: PrivateServer,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    server = ticking_server
    user = server.register()
    verify = {"ticks": 3, "timeout": 60, "on_failure": "rollback", "rollback": "standby", "standby": "bots-b"}
    bot = Bot(server, user, tmp_path, verify)
    code, _doc, err = bot.deploy(GOOD % ("v1", "v1"), verify=False)  # the user's code runs only from here on
    assert code == 0, err + "\n" + server.diagnosis()
    activate_user(server, user)
    bot.wait_running("v1")

    code, doc, err = bot.deploy(BAD, verify=True)
    assert code == 10, err
    _check_failing(doc, "switched-back")
    assert user.active_branch() == "bots"
    tick = read_memory(server, user, "tick")
    bot.wait_running("v1", after=tick if isinstance(tick, int) else 0)
