"""The Action's ``command: drift`` end to end: action.yml's steps as the runner runs them, the real stand-in over
loopback, GitHub's issues API answered by a fake at the httpx transport seam. A deploy, then a scheduled drift
check: one issue is opened when a branch was changed outside Git, updated while it stays drifted, and closed once
a deploy made the server hold Git's code again."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.github.api import drift_marker
from gitops.github.issues import DRIFT_ISSUE_TITLE
from gitops.standin.testing import FULL_TOKEN, StandIn
from tests.action.runner import ActionRun
from tests.action.test_action import DEPLOY, REPO, World, assert_no_secret, make_world
from tests.project import edit_on_server

DRIFT = {"command": "drift", "screeps-token": FULL_TOKEN, "drift-issue": "true"}


@pytest.fixture
def world(tmp_path: Path, standin: StandIn) -> World:
    return make_world(tmp_path, standin)


def scheduled(world: World, with_: dict[str, str]) -> ActionRun:
    """A run of the action from a ``schedule`` event (as drift.yml runs it: the ledger handed on by its ``ledger``
    job, which holds no credential; the drift job restores no cache)."""
    sha = world.commit("nothing new")
    env = world.job_env("schedule", {"schedule": "17 */6 * * *"}, sha)
    run = world.runner.use(world.handed_ledger(with_, env), job_env=env, in_process=world._how())
    assert run.steps["restore"].outcome == "skipped"
    return run


def test_drift_opens_one_issue_updates_it_then_closes_it(world: World) -> None:
    assert world.push(DEPLOY).outcome == "success"
    world.github.add_issue("Harvest faster", "a pull request", pull_request=True)
    world.github.add_issue("Unrelated", "someone's issue")

    quiet = scheduled(world, DRIFT)
    assert quiet.outcome == "success", quiet.stderr
    assert quiet.outputs["exit-code"] == "0"
    assert quiet.outputs["drifted"] == "false"
    assert quiet.outputs["issue-url"] == ""
    assert "No drift: every branch this tool applied holds what it applied." in quiet.summary
    assert world.github.writes() == [], "nothing drifted and no issue is open: nothing to write"

    edit_on_server(world.standin, "main", {"main": "module.exports.loop = () => {}; // edited in game\n"})
    first = scheduled(world, DRIFT)
    assert first.outcome == "success", first.stderr
    assert first.outputs["exit-code"] == "2"
    assert first.outputs["drifted"] == "true"
    mark = drift_marker("gitops.yaml")
    [issue] = [i for i in world.github.issues if i.body.startswith(mark)]
    assert issue.title == DRIFT_ISSUE_TITLE
    assert issue.state == "open"
    assert "| `local` | `main` | drifted | `~ main` |" in issue.body
    assert first.outputs["issue-url"].endswith(f"/issues/{issue.number}")
    assert "| `local` | `main` | drifted |" in first.summary
    assert f"Drift issue created: #{issue.number}" in first.stdout

    edit_on_server(world.standin, "main", {"hack": "1;\n"})
    second = scheduled(world, DRIFT)
    assert second.outcome == "success", second.stderr
    assert [i.number for i in world.github.issues if i.body.startswith(mark)] == [issue.number], "one issue"
    assert "`~ main, + hack`" in issue.body
    assert f"Drift issue updated: #{issue.number}" in second.stdout

    world.write({"src/role/harvester.js": "module.exports.run = () => {\n  // harvest more\n};\n"})
    assert world.push(DEPLOY).outcome == "success"  # apply makes the server hold Git's code again
    closing = scheduled(world, DRIFT)
    assert closing.outcome == "success", closing.stderr
    assert closing.outputs["drifted"] == "false"
    assert (issue.state, issue.state_reason) == ("closed", "completed")
    assert "No drift" in issue.body
    assert f"Drift issue closed: #{issue.number}" in closing.stdout
    assert world.github.writes() == [
        ("POST", f"/api/v3/repos/{REPO}/issues"),
        ("PATCH", f"/api/v3/repos/{REPO}/issues/{issue.number}"),
        ("PATCH", f"/api/v3/repos/{REPO}/issues/{issue.number}"),
    ]
    # The other issues were left alone; the token went to the API host only.
    assert [i.state for i in world.github.issues if not i.body.startswith(mark)] == ["open", "open"]
    assert world.github.tokens_sent_to == {"https://github.example.test"}
    for run in (quiet, first, second, closing):
        assert_no_secret(world, run)


def test_without_drift_issue_the_report_is_in_the_summary_only(world: World) -> None:
    assert world.push(DEPLOY).outcome == "success"
    edit_on_server(world.standin, "main", {"main": "1;\n"})
    run = scheduled(world, {"command": "drift", "screeps-token": FULL_TOKEN})
    assert run.outcome == "success", run.stderr
    assert run.outputs["drifted"] == "true"
    assert world.github.others() == []
    assert "Drift: 1 of 1 branch(es) changed outside Git." in run.summary


def test_a_read_only_token_is_a_warning_not_a_failure(world: World) -> None:
    assert world.push(DEPLOY).outcome == "success"
    edit_on_server(world.standin, "main", {"main": "1;\n"})
    world.github.read_only = True
    run = scheduled(world, DRIFT)
    assert run.outcome == "success", run.stderr
    assert run.outputs["drifted"] == "true"
    warning = next(line for line in run.stdout.splitlines() if line.startswith("::warning "))
    assert "the drift issue was not updated" in warning
    assert "issues: write" in warning


def test_drift_without_credentials_fails_with_exit_7(world: World) -> None:
    assert world.push(DEPLOY).outcome == "success"
    run = scheduled(world, {"command": "drift", "screeps-token": ""})
    assert run.outcome == "failure"
    assert run.outputs["exit-code"] == "7"
    assert run.outputs["drifted"] == ""
    assert "The drift check failed" in run.summary
    [warning] = [line for line in run.stdout.splitlines() if line.startswith("::warning ")]
    assert "add the repository secret SCREEPS_TOKEN" in warning
    assert "Settings → Secrets and variables → Actions" in warning
