"""The CLI's own rules, run in-process through ``gitops.cli.run``: environment switches, credentials that cannot be
sent, and that every failure is one ``Error:`` line with a hint and no secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.server.testing import StandIn
from tests.project import Project


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "main", "root": "src"}])
    p.commit()
    return p


# --- credentials that cannot travel in a header ------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "problem"),
    [
        ("canaryCR0123456789\rabcdef0123456789", "contains a line break (carriage return or newline)"),
        (
            "canaryUML0123456789\u00fcabcdef012345",
            "contains a non-ASCII character (only letters, digits and ASCII punctuation can be sent)",
        ),
    ],
)
@pytest.mark.parametrize("command", ["plan", "apply"])
def test_a_token_that_cannot_be_sent_stops_with_exit_7_and_is_never_shown(
    project: Project, standin: StandIn, monkeypatch: pytest.MonkeyPatch, token: str, problem: str, command: str
) -> None:
    monkeypatch.setenv("SCREEPS_TOKEN", token)
    result = project.gitops(command, *(["--yes"] if command == "apply" else []))
    assert result.code == 7
    assert result.err == (
        f"Error: the token for server 'local' in the environment variable SCREEPS_TOKEN {problem}; it is not used.\n"
        "Copy the token again from the account settings (Account, Auth tokens) and set it without quotes, spaces or "
        "line endings (a file written on Windows ends its lines with a carriage return).\n"
    )
    for part in (token[:12], token[-12:], repr(token)[1:-1], repr(token.encode())[2:-1]):
        assert part not in result.out + result.err
    assert standin.count("GET /api/user/code") == standin.count("GET /api/user/branches") == 0
