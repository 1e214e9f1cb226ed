"""``gitops/app/status.py``: what runs where, asked of the stand-in on a loopback port against the ledger's records;
a server that cannot be asked is shown from the ledger and fails the command with its exit code."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from gitops.app import pipeline
from gitops.app.options import Options
from gitops.app.session import open_session
from gitops.app.status import StatusReport, status, status_failure
from gitops.errors import ExitCode
from gitops.standin.testing import FULL_TOKEN, StandIn
from tests.project import edit_on_server


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Bot:
    def __init__(self, root: Path, standin: StandIn) -> None:
        self.root = root
        self.standin = standin
        (root / "src").mkdir(parents=True)
        (root / "src" / "main.js").write_text("module.exports.loop = () => {};\n", encoding="utf-8")
        self.manifest({"local": standin.url})

    def manifest(self, servers: dict[str, str]) -> None:
        data: dict[str, Any] = {
            "version": 1,
            "servers": {name: {"url": url, "token_env": "SCREEPS_TOKEN"} for name, url in servers.items()},
            "branches": [{"server": name, "branch": "main", "root": "src"} for name in servers],
        }
        (self.root / "gitops.yaml").write_text(json.dumps(data), encoding="utf-8")

    @property
    def options(self) -> Options:
        return Options(
            manifest=self.root / "gitops.yaml",
            env={"SCREEPS_TOKEN": FULL_TOKEN},
            state_dir=self.root.parent / "state",
            clock=self.standin.clock,
            max_wait=0,
        )

    def apply(self) -> None:
        with open_session(self.options) as session:
            assert pipeline.apply(session, pipeline.make_or_load(session, isolate=False), saved=False).exit_code == 0

    def status(self) -> StatusReport:
        with open_session(self.options) as session:
            return status(session)


@pytest.fixture
def bot(tmp_path: Path, standin: StandIn) -> Bot:
    return Bot(tmp_path / "bot", standin)


def test_a_deployed_branch_is_checked_on_the_server(bot: Bot) -> None:
    bot.apply()
    report = bot.status()
    [row] = report.rows
    assert (row.server, row.branch, row.exists) == ("local", "main", True)
    assert row.verified
    assert row.drift is not None
    assert row.drift.status == "none"
    assert row.digest is not None
    assert report.failures == {}
    assert status_failure(report) is None


def test_code_changed_outside_git_is_drift(bot: Bot, standin: StandIn) -> None:
    bot.apply()
    edit_on_server(standin, "main", {"main": "module.exports.loop = () => 'hotfix';\n"})
    [row] = bot.status().rows
    assert row.drift is not None
    assert row.drift.status == "drifted"
    assert row.drift.changed == ["main"]


def test_a_branch_this_tool_never_applied_is_not_shown(bot: Bot) -> None:
    report = bot.status()
    assert report.rows == []
    assert report.failures == {}


def test_a_server_that_cannot_be_asked_fails_the_command_after_the_ledgers_rows(bot: Bot, standin: StandIn) -> None:
    bot.apply()
    bot.manifest({"local": standin.url, "gone": f"http://127.0.0.1:{_closed_port()}"})
    report = bot.status()
    assert [row.server for row in report.rows] == ["local"]  # "gone" has no record in its ledger to show
    assert list(report.failures) == ["gone"]
    error = status_failure(report)
    assert error is not None
    assert error.exit_code == ExitCode.FAILURE
    assert error.message.startswith("status cannot say what runs on server 'gone': cannot connect to server 'gone'")
    assert error.message.endswith("the rows above for it are the ledger's word, not checked on the server")
