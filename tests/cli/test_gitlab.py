"""``gitops gitlab``: the GitLab CI front end as a job runs it, through the CLI (errors printed as every command's),
against the real stand-in over loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gitops.cli import run
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.factories import commit_all, make_repo


def _job(tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch, **variables: str) -> None:
    manifest = {
        "version": 1,
        "servers": {"local": {"url": standin.url, "token_env": "SCREEPS_TOKEN"}},
        "branches": [{"server": "local", "branch": "main", "root": "src"}],
    }
    root = make_repo(tmp_path / "bot", {"src/main.js": "// bot\n", "gitops.yaml": yaml.safe_dump(manifest)})
    monkeypatch.chdir(root)
    variables = {
        "CI_PIPELINE_SOURCE": "push",
        "CI_COMMIT_SHA": commit_all(root),
        "GITOPS_STATE_DIR": str(tmp_path / "state"),
        "GITOPS_FILES_DIR": str(tmp_path / "files"),
        "GITOPS_OUTPUT_FILE": str(tmp_path / "gitops.env"),
        **variables,
    }
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


def test_a_push_job_plans_and_writes_its_outputs(
    tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _job(tmp_path, standin, monkeypatch, SCREEPS_TOKEN=FULL_TOKEN)
    assert run(["gitlab"], clock=standin.clock) == 0  # a plan with changes is not a failed job
    assert "local/main: create" in capsys.readouterr().out
    assert "GITOPS_EXIT_CODE=2\n" in (tmp_path / "gitops.env").read_text("utf-8")
    assert standin.count("GET /api/user/branches", ALICE) == 1


def test_a_bad_variable_is_an_error_with_its_exit_code_and_nothing_sent(
    tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _job(tmp_path, standin, monkeypatch, SCREEPS_TOKEN=FULL_TOKEN, GITOPS_COMMAND="deploy")
    assert run(["gitlab"], clock=standin.clock) == 4
    err = capsys.readouterr().err
    assert err.startswith("Error: variable GITOPS_COMMAND is 'deploy'; it must be one of plan, apply, drift")
    assert "Traceback" not in err
    assert standin.count("GET /api/user/branches") == 0
