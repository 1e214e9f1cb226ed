"""The CI policy's flow (:mod:`gitops.app.ci.run`) through a host that records what it is told, against the real
stand-in over loopback: the hand-overs, the refresh of a run without credentials, the exit codes an error carries."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gitops.app.ci.host import CiInputs, Command
from gitops.app.ci.report import Report
from gitops.app.ci.run import BUILD_EXIT_ENV, BuildStepError, CarriedError, run, step_code
from gitops.core.rehearsalresult import RehearsalResult
from gitops.edges.rehearsalfile import write_result
from gitops.errors import ExitCode, ManifestError
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.app.ci.recording import Change, Recording
from tests.factories import commit_all, make_repo

LIST = "GET /api/user/branches"


def _host(tmp_path: Path, url: str, command: Command = "plan", **servers: str) -> Recording:
    urls = {"local": url, **servers}
    manifest = {
        "version": 1,
        "servers": {name: {"url": u, "token_env": "SCREEPS_TOKEN"} for name, u in urls.items()},
        "branches": [{"server": name, "branch": "main", "root": "src"} for name in urls],
    }
    root = make_repo(tmp_path / "bot", {"src/main.js": "// bot\n", "gitops.yaml": yaml.safe_dump(manifest)})
    commit_all(root)
    return Recording(CiInputs(command=command, manifest=root / "gitops.yaml"), tmp_path / "files")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(tmp_path), "GITOPS_STATE_DIR": str(tmp_path / "state"), **extra}


def test_a_push_plans_with_the_token_and_hands_the_report_over_without_a_comment(
    tmp_path: Path, standin: StandIn
) -> None:
    host = _host(tmp_path, standin.url)
    assert run(host, _env(tmp_path, SCREEPS_TOKEN=FULL_TOKEN), clock=standin.clock) == 0
    assert host.told == ["record", "summary", "outputs"]
    assert host.report is not None
    assert host.report.exit_code == ExitCode.CHANGES
    assert host.report.plan_file is not None
    assert host.report.plan_file.parent == tmp_path / "files"
    assert FULL_TOKEN in host.masked
    assert standin.count(LIST, ALICE) == 1


def test_a_change_without_credentials_is_planned_from_the_ledger_and_says_so(tmp_path: Path, standin: StandIn) -> None:
    host = _host(tmp_path, standin.url)
    host.change = Change(from_fork=True)
    assert run(host, _env(tmp_path), clock=standin.clock) == 0
    assert standin.count(LIST) == 0  # the refresh was never, decided before the session opened
    assert host.told == ["comment", "record", "summary", "outputs"]
    assert host.report is not None
    assert host.report.plan is not None
    assert host.report.plan.refresh == "never"
    notice = "This change comes from a fork, and the system gives forks no secrets, so there are no credentials"
    assert host.report.notices[0].startswith(notice)
    assert host.annotations == [("notice", host.report.notices[0])]


def test_a_failed_server_fails_the_plan_with_the_exit_code_it_carries(tmp_path: Path, standin: StandIn) -> None:
    host = _host(tmp_path, standin.url, down="http://127.0.0.1:9")
    with pytest.raises(CarriedError) as failed:
        run(host, _env(tmp_path, SCREEPS_TOKEN=FULL_TOKEN), clock=standin.clock)
    assert failed.value.message == "planning failed on server 'down'; the other servers are planned"
    assert failed.value.exit_code == ExitCode.FAILURE
    assert host.annotations[0][0] == "error"
    assert host.annotations[0][1].startswith("server 'down' failed: ")
    assert host.report is not None
    assert host.report.error is failed.value
    assert host.report.plan is not None


@pytest.mark.parametrize(
    ("raw", "code"),
    [("6", ExitCode.LOCAL_CODE), ("3", ExitCode.BUDGET), ("99", ExitCode.FAILURE), ("crashed", ExitCode.LOCAL_CODE)],
)
def test_a_failed_build_step_stops_the_run_with_its_exit_code(
    tmp_path: Path, standin: StandIn, raw: str, code: ExitCode
) -> None:
    host = _host(tmp_path, standin.url)
    with pytest.raises(BuildStepError) as stopped:
        run(host, _env(tmp_path, SCREEPS_TOKEN=FULL_TOKEN, **{BUILD_EXIT_ENV: raw}), clock=standin.clock)
    assert stopped.value.exit_code == code
    assert standin.count(LIST) == 0
    assert host.report is not None
    assert host.report.exit_code == code


@pytest.mark.parametrize("raw", ["0", str(int(ExitCode.USAGE)), str(int(ExitCode.MANIFEST))])
def test_a_build_step_that_left_the_error_to_this_step_does_not_stop_it(
    tmp_path: Path, standin: StandIn, raw: str
) -> None:
    host = _host(tmp_path, standin.url)
    assert run(host, _env(tmp_path, SCREEPS_TOKEN=FULL_TOKEN, **{BUILD_EXIT_ENV: raw}), clock=standin.clock) == 0


def test_a_run_that_cannot_start_still_hands_its_report_over(tmp_path: Path) -> None:
    host = Recording(CiInputs(command="plan", manifest=tmp_path / "missing.yaml"), tmp_path / "files")
    with pytest.raises(ManifestError):
        run(host, _env(tmp_path))
    assert host.told == ["record", "summary", "outputs"]
    assert host.report is not None
    assert host.report.exit_code == ExitCode.MANIFEST
    assert host.annotations[-1][0] == "error"


def test_the_comment_job_carries_the_rehearse_jobs_error_and_code(tmp_path: Path) -> None:
    result = tmp_path / "rehearsal.json"
    write_result(result, RehearsalResult(100, "", None, (), "the world stopped", int(ExitCode.REHEARSAL_UNKNOWN)))
    host = Recording(CiInputs(command="comment", manifest=Path("gitops.yaml"), rehearsal_file=result), tmp_path)
    host.change = Change()
    assert run(host, _env(tmp_path)) == 0
    assert host.report is not None
    assert isinstance(host.report.error, CarriedError)
    assert host.report.error.message == "the world stopped"
    assert host.report.exit_code == host.report.error.exit_code == ExitCode.REHEARSAL_UNKNOWN


@pytest.mark.parametrize(
    ("command", "code", "step"),
    [
        ("plan", ExitCode.CHANGES, 0),
        ("plan", ExitCode.BUDGET, 0),  # raised: the CLI gives the error's code, the outputs the 3
        ("apply", ExitCode.UNVERIFIED, int(ExitCode.UNVERIFIED)),
        ("comment", ExitCode.UNHEALTHY, 0),
    ],
)
def test_the_steps_exit_code(command: Command, code: ExitCode, step: int) -> None:
    assert step_code(Report(command=command, manifest="gitops.yaml", exit_code=code)) == step
