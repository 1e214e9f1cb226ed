"""Targets and failure isolation end to end (issue 14): --server/--branch restrict the work to those servers and
branches, an unreachable server does not stop the others, and apply --keep-going applies what it can."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml

from gitops.standin.testing import ALICE, StandIn
from tests.project import Project

UPLOAD = "POST /api/user/code"


def closed_port() -> int:
    """A loopback port nothing listens on: bound, then closed (connections to it are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    """Two servers: ``good`` (the stand-in) and ``bad`` (a closed loopback port); a built branch on ``bad`` whose
    build would fail if it ran."""
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n", "other/main.js": "// other\n"})
    data = {
        "version": 1,
        "servers": {
            "good": {"url": standin.url, "token_env": "SCREEPS_TOKEN"},
            "bad": {"url": f"http://127.0.0.1:{closed_port()}", "token_env": "SCREEPS_TOKEN"},
        },
        "branches": [
            {"server": "good", "branch": "main", "root": "src"},
            {"server": "bad", "branch": "main", "root": "src"},
            {"server": "good", "branch": "other", "root": "other"},
        ],
    }
    (p.root / "gitops.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    p.commit()
    return p


def test_apply_with_server_target_does_not_contact_the_unreachable_server(project: Project, standin: StandIn) -> None:
    result = project.apply("--yes", "--server", "good")
    assert result.code == 0, result.err
    assert "bad" not in result.out
    assert standin.branch_modules(ALICE, "main") == {"main": "module.exports.loop = () => {};\n"}
    assert standin.branch_modules(ALICE, "other") == {"main": "// other\n"}


def test_branch_target_restricts_to_that_branch(project: Project, standin: StandIn) -> None:
    result = project.apply("--yes", "--branch", "good/other")
    assert result.code == 0, result.err
    assert standin.branch_modules(ALICE, "other") == {"main": "// other\n"}
    assert standin.branch_modules(ALICE, "main") is None


def test_targets_from_the_environment_are_comma_separated(
    project: Project, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITOPS_SERVERS", "good")
    monkeypatch.setenv("GITOPS_BRANCHES", "main,other")
    code, doc = project.plan_json()
    assert code == 2
    assert sorted((b["server"], b["branch"]) for b in doc["branches"]) == [("good", "main"), ("good", "other")]
    assert doc["failed"] == []


@pytest.mark.parametrize(
    ("unread", "read"), [("GITOPS_SERVER", "GITOPS_SERVERS"), ("GITOPS_BRANCH", "GITOPS_BRANCHES")]
)
def test_a_singular_targets_variable_is_refused_not_ignored(
    project: Project, standin: StandIn, monkeypatch: pytest.MonkeyPatch, unread: str, read: str
) -> None:
    # plan once read GITOPS_SERVERS and silently ignored GITOPS_SERVER (token's name): one name, or a clear error.
    monkeypatch.setenv(unread, "good")
    for command in ("plan", "apply", "status", "drift"):
        result = project.gitops(command, "--yes") if command == "apply" else project.gitops(command)
        assert result.code == 4, (command, result.out, result.err)
        assert f"Error: the environment variable {unread} is set, but it is not read" in result.err
        assert f"Rename it to {read}" in result.err
    assert standin.count("GET /api/user/branches") == 0  # refused before any request


def test_unknown_target_names_the_valid_ones(project: Project) -> None:
    result = project.plan("--server", "nope")
    assert result.code == 4
    assert "--server nope" in result.err
    assert "Valid servers: bad, good" in result.err
    result = project.plan("--branch", "nope")
    assert result.code == 4
    assert "good/other" in result.err
    assert "Traceback" not in result.err


def test_plan_without_targets_reports_the_good_server_and_marks_the_bad(project: Project, standin: StandIn) -> None:
    result = project.plan("--json")
    assert result.code == 1, result.err
    doc = json.loads(result.out)
    assert sorted((b["server"], b["branch"]) for b in doc["branches"]) == [("good", "main"), ("good", "other")]
    [failed] = doc["failed"]
    assert (failed["server"], failed["branches"], failed["exit_code"]) == ("bad", ["main"], 1)
    assert "Error: " in result.err
    assert "127.0.0.1" in result.err

    text = project.plan()
    assert text.code == 1
    assert "bad: FAILED (exit 1), not planned" in text.out
    assert "good/main: create" in text.out
    assert "1 server(s) failed: bad" in text.out

    markdown = project.plan("--markdown")
    assert markdown.code == 1
    assert "**Failed servers** (not planned)" in markdown.out
    assert "`good`" in markdown.out


def test_plan_with_every_server_failing_is_the_error_itself(project: Project, standin: StandIn) -> None:
    result = project.plan("--server", "bad")
    assert result.code == 1
    assert result.out == ""
    assert result.err.startswith("Error: ")


def test_apply_stops_before_writing_when_a_server_fails(project: Project, standin: StandIn) -> None:
    result = project.apply("--yes")
    assert result.code == 1
    assert standin.count(UPLOAD, ALICE) == 0
    assert standin.branch_modules(ALICE, "main") is None


def test_apply_keep_going_applies_the_reachable_server_and_reports_the_other(
    project: Project, standin: StandIn
) -> None:
    result = project.apply("--yes", "--keep-going")
    assert result.code == 1, result.err
    assert standin.branch_modules(ALICE, "main") == {"main": "module.exports.loop = () => {};\n"}
    assert standin.branch_modules(ALICE, "other") == {"main": "// other\n"}
    assert "Error: server 'bad' was not planned" in result.err
    assert "good: Applied:" in result.out


def test_saved_plan_with_targets_applies_only_the_targeted_part(
    project: Project, standin: StandIn, tmp_path: Path
) -> None:
    saved = tmp_path / "plan.json"
    result = project.plan("--server", "good", "--out", str(saved))
    assert result.code == 2, result.err
    applied = project.apply(str(saved), "--branch", "other")
    assert applied.code == 0, applied.err
    assert standin.branch_modules(ALICE, "other") == {"main": "// other\n"}
    assert standin.branch_modules(ALICE, "main") is None


def test_saved_partial_plan_needs_keep_going(project: Project, standin: StandIn, tmp_path: Path) -> None:
    saved = tmp_path / "plan.json"
    result = project.plan("--out", str(saved))
    assert result.code == 1
    refused = project.apply(str(saved))
    assert refused.code == 8
    assert "--keep-going" in refused.err
    assert standin.count(UPLOAD, ALICE) == 0
    applied = project.apply(str(saved), "--keep-going")
    assert applied.code == 1
    assert standin.branch_modules(ALICE, "main") == {"main": "module.exports.loop = () => {};\n"}


def test_other_branches_code_is_neither_read_nor_built(project: Project, standin: StandIn) -> None:
    data = yaml.safe_load((project.root / "gitops.yaml").read_text(encoding="utf-8"))
    # The bad server's branch builds with a command that fails, from a root that does not exist.
    data["branches"][1].update({"root": "missing", "build": "false"})
    (project.root / "gitops.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    project.commit()
    assert project.plan().code == 6  # without targets the build runs (and fails) before any server is contacted
    result = project.apply("--yes", "--server", "good")
    assert result.code == 0, result.err
    assert standin.branch_modules(ALICE, "main") == {"main": "module.exports.loop = () => {};\n"}
