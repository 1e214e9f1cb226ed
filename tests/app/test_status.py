"""``gitops/app/status.py``: what runs where, asked of the stand-in on a loopback port against the ledger's records;
a server that cannot be asked is shown from the ledger and fails the command with its exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.app.session import open_session
from gitops.app.status import StatusReport, status, status_failure
from gitops.errors import ExitCode
from gitops.standin.testing import StandIn
from tests.app.stages import Bot
from tests.loopback import closed_port
from tests.project import edit_on_server


def _status(bot: Bot) -> StatusReport:
    with open_session(bot.options) as session:
        return status(session)


def _apply(bot: Bot) -> None:
    assert bot.applied().exit_code == ExitCode.OK


@pytest.fixture
def bot(tmp_path: Path, standin: StandIn) -> Bot:
    return Bot(tmp_path / "bot", standin)


def test_a_deployed_branch_is_checked_on_the_server(bot: Bot) -> None:
    _apply(bot)
    report = _status(bot)
    [row] = report.rows
    assert (row.server, row.branch, row.exists) == ("local", "main", True)
    assert row.verified
    assert row.drift is not None
    assert row.drift.status == "none"
    assert row.digest is not None
    assert report.failures == {}
    assert status_failure(report) is None


def test_code_changed_outside_git_is_drift(bot: Bot, standin: StandIn) -> None:
    _apply(bot)
    edit_on_server(standin, "main", {"main": "module.exports.loop = () => 'hotfix';\n"})
    [row] = _status(bot).rows
    assert row.drift is not None
    assert row.drift.status == "drifted"
    assert row.drift.changed == ["main"]


def test_a_branch_this_tool_never_applied_is_not_shown(bot: Bot) -> None:
    report = _status(bot)
    assert report.rows == []
    assert report.failures == {}


def test_a_server_that_cannot_be_asked_fails_the_command_after_the_ledgers_rows(bot: Bot, standin: StandIn) -> None:
    _apply(bot)
    bot.servers({"local": standin.url, "gone": f"http://127.0.0.1:{closed_port()}"})
    report = _status(bot)
    assert [row.server for row in report.rows] == ["local"]  # "gone" has no record in its ledger to show
    assert list(report.failures) == ["gone"]
    error = status_failure(report)
    assert error is not None
    assert error.exit_code == ExitCode.FAILURE
    assert error.message.startswith("status cannot say what runs on server 'gone': cannot connect to server 'gone'")
    assert error.message.endswith("the rows above for it are the ledger's word, not checked on the server")
