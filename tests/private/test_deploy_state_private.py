"""Deployment state that lasts (issue 39) on the real private server with its world ticking: a real ``gitops apply``
stopped by SIGINT, SIGTERM or kill -9 during its watch, a failing deploy left in place, and a restore whose upload
fails; each state recorded in the ledger, reported by the next ``plan`` with exit 12, and settled by
``apply --verify-again`` or ``gitops rollback`` (the server's own branch content checked).

One ticking server for the module (each test has a user of its own), its ticks shortened; the watch of a run to be
stopped is known to have begun when the ledger records it ``pending`` and the run's ``--debug`` output says its game
socket subscribed to the console. The restore that fails goes through :mod:`tests.private.relay`, a loopback relay
in front of the server that answers the second ``POST /api/user/code`` with 500 (the real server cannot fail one
upload on demand; a proxy in front of it can).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.factories import interruptible_python, reaped, verification_state, wait_while_running
from tests.private.harness import PrivateServer
from tests.private.relay import relay
from tests.private.test_bots_in_game import read_memory, ticking
from tests.private.test_verify_private import BAD, GOOD, Bot, activate_user

pytestmark = pytest.mark.private_server

#: Milliseconds per tick of the module's world (the server's default is 1,000).
TICK_MS = 300
#: How long a run to be stopped may take to begin its watch.
WATCH_BEGINS_WITHIN = 60.0
V1 = GOOD % ("v1", "v1")
V2 = GOOD % ("v2", "v2")


@pytest.fixture(scope="module")
def world() -> Iterator[PrivateServer]:
    """One private server whose world ticks every :data:`TICK_MS` ms, for every test of the module."""
    with ticking() as server:
        server.cli(f"system.setTickDuration({TICK_MS})")
        yield server


@pytest.fixture(autouse=True)
def _bounded() -> Iterator[None]:
    started = time.monotonic()
    yield
    assert time.monotonic() - started < 150


def _running_bot(server: PrivateServer, tmp_path: Path, url: str | None = None) -> Bot:
    """A fresh user whose v1 (deployed without ``verify``, to ``url`` when given) runs in the world."""
    user = server.register()
    bot = Bot(server, user, tmp_path, {"ticks": 3, "timeout": 60, "on_failure": "rollback"})
    bot.url = url or bot.url
    code, _doc, err = bot.deploy(V1, verify=False)
    assert code == 0, err + "\n" + server.diagnosis()
    activate_user(server, user)
    bot.wait_running("v1")
    return bot


def _state(bot: Bot) -> str | None:
    return verification_state(bot.tmp / "state", "bots")


def _reason(bot: Bot) -> str:
    return str(json.loads(bot.gitops("status", "--json").stdout)["branches"][0]["verification"]["reason"])


def _apply_and_stop_its_watch(bot: Bot, signum: int) -> tuple[int, str]:
    """v2 (healthy) applied by a real ``gitops apply`` process whose watch (1,000 ticks) has begun when ``signum``
    comes; its exit code and output (stdout and stderr together)."""
    bot.verify = {"ticks": 1000, "timeout": 120, "on_failure": "rollback"}
    bot.write(V2, verify=True)
    log = bot.tmp / "apply.log"

    def watching() -> bool:
        return _state(bot) == "pending" and "socket: subscribed to" in log.read_text("utf-8", errors="replace")

    with log.open("wb") as sink:
        argv = interruptible_python("-m", "gitops", "--debug", "apply", "--yes")
        proc = subprocess.Popen(argv, cwd=bot.repo, env=bot.env(), stdout=sink, stderr=subprocess.STDOUT)
        with reaped(proc):
            wait_while_running(proc, watching, timeout=WATCH_BEGINS_WITHIN)
            assert watching(), log.read_text("utf-8", errors="replace") + "\n" + bot.server.diagnosis()
            proc.send_signal(signum)
            proc.wait(timeout=30)
    text = log.read_text("utf-8", errors="replace")
    assert bot.user.password not in text
    assert bot.user.code("bots") == {"main": V2}  # nothing was undone after the signal
    return proc.returncode, text


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_the_watch_records_interrupted_until_verified_again(
    world: PrivateServer, tmp_path: Path, signum: int
) -> None:
    bot = _running_bot(world, tmp_path)
    code, text = _apply_and_stop_its_watch(bot, signum)
    assert code == 12, text
    assert "verify home/bots: INTERRUPTED after" in text
    assert "recorded as interrupted (unverified)" in text
    assert "Traceback" not in text
    assert _state(bot) == "interrupted"
    assert f"interrupted by {signal.Signals(signum).name} during the watch" in _reason(bot)

    plan = bot.gitops("plan")
    assert plan.returncode == 12, plan.stdout + plan.stderr
    assert "No changes" not in plan.stdout
    assert "UNVERIFIED: its watch was interrupted" in plan.stdout
    assert "gitops apply --verify-again" in plan.stdout

    again = bot.gitops("apply", "--yes", "--verify-again", "--verify-ticks", "3")
    assert again.returncode == 0, again.stdout + again.stderr + "\n" + world.diagnosis()
    assert "verify home/bots: HEALTHY" in again.stdout
    assert _state(bot) == "healthy"
    assert bot.gitops("plan").returncode == 0
    bot.wait_running("v2")


def test_kill_9_during_the_watch_leaves_pending_which_the_next_plan_reports(
    world: PrivateServer, tmp_path: Path
) -> None:
    bot = _running_bot(world, tmp_path)
    code, text = _apply_and_stop_its_watch(bot, signal.SIGKILL)
    assert code == -signal.SIGKILL, text
    assert _state(bot) == "pending"
    plan = bot.gitops("plan")
    assert plan.returncode == 12, plan.stdout + plan.stderr
    assert "No changes" not in plan.stdout
    assert "UNVERIFIED: its watch never ended (the run was killed)" in plan.stdout
    status = bot.gitops("status", "--json")
    assert status.returncode == 12, status.stderr
    [row] = json.loads(status.stdout)["branches"]
    assert (row["verification"]["state"], row["active"], row["exists"]) == ("pending", ["world"], True)


def test_a_failing_deploy_left_in_place_until_a_rollback(world: PrivateServer, tmp_path: Path) -> None:
    bot = _running_bot(world, tmp_path)
    bot.verify = {"ticks": 3, "timeout": 60, "on_failure": "report"}
    code, doc, err = bot.deploy(BAD, verify=True)
    assert code == 9, err + "\n" + world.diagnosis()
    [verify] = doc["verify"]
    assert (verify["result"], verify["action"]) == ("unhealthy", "none"), verify
    assert verify["health"]["evidence"][0].startswith("TypeError: Cannot read propert"), verify
    assert _state(bot) == "failing"
    assert bot.user.code("bots") == {"main": BAD}  # left in place

    plan = bot.gitops("plan")
    assert plan.returncode == 12, plan.stdout + plan.stderr
    assert "No changes" not in plan.stdout
    assert "home/bots: deploy" in plan.stdout
    assert "FAILING" in plan.stdout

    back = bot.gitops("rollback", "--yes")
    assert back.returncode == 0, back.stdout + back.stderr + "\n" + world.diagnosis()
    assert "Rolling back home/bots to deploy #1" in back.stdout
    assert "verify home/bots: HEALTHY" in back.stdout
    assert bot.user.code("bots") == {"main": V1}  # the server's branch holds the previous code again
    assert _state(bot) == "healthy"
    assert bot.gitops("status").returncode == 0
    tick = read_memory(world, bot.user, "tick")
    bot.wait_running("v1", after=tick if isinstance(tick, int) else 0)


def test_a_restore_that_fails_is_recorded_rollback_failed(world: PrivateServer, tmp_path: Path) -> None:
    with relay(world.port) as proxy:
        bot = _running_bot(world, tmp_path, url=proxy.url)
        proxy.fail, proxy.spare = "POST /api/user/code", 1  # the deploy's upload passes; the restore's fails
        bot.write(BAD, verify=True)
        failed = bot.gitops("apply", "--yes", "--json", "--max-wait", "0")
        assert failed.returncode == 11, failed.stdout + failed.stderr + "\n" + world.diagnosis()
        assert proxy.failed, proxy.seen  # the relay, not the server, answered the restore
        [verify] = json.loads(failed.stdout)["verify"]
        assert (verify["result"], verify["action"]) == ("undo-failed", "undo-failed"), verify
        assert "500" in verify["undo_error"], verify
        assert _state(bot) == "rollback-failed"
        assert bot.user.code("bots") == {"main": BAD}  # the failing code still runs

        proxy.fail = None
        plan = bot.gitops("plan")
        assert plan.returncode == 12, plan.stdout + plan.stderr
        assert "No changes" not in plan.stdout
        assert "FAILING: its rollback failed" in plan.stdout

        undone = bot.gitops("rollback", "--yes")
        assert undone.returncode == 0, undone.stdout + undone.stderr + "\n" + world.diagnosis()
        assert bot.user.code("bots") == {"main": V1}
        assert _state(bot) == "healthy"
        history = json.loads(bot.gitops("history", "--json").stdout)["servers"]["home"]
        assert [(d["n"], d["how"], d["state"]) for d in history] == [
            (3, "rollback", "healthy"),
            (2, "apply", "rollback-failed"),
            (1, "apply", None),
        ]
