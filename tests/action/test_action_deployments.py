"""Deployment records: on apply outside pull requests, one GitHub deployment per server/branch the apply changed
(the environment named from both, ref = the commit, a status with the run as its log), earlier deployments of the
environment marked inactive after a success. action.yml's steps as the runner runs them, the real stand-in over
loopback, GitHub's Deployments API answered by the fake at the httpx transport seam."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.github.deployments import deployment_environment
from gitops.standin.testing import StandIn
from tests.action.test_action import DEPLOY, PLAN, REPO, World, assert_no_secret, make_world

ENV = "screeps/local/main"
RUN_URL_PREFIX = f"https://github.example.test/{REPO}/actions/runs/"


@pytest.fixture
def world(tmp_path: Path, standin: StandIn) -> World:
    return make_world(tmp_path, standin)


def warnings(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("::warning ")]


def test_a_deploy_records_one_deployment_with_its_commit_and_the_run_as_log(world: World) -> None:
    run = world.push(DEPLOY)
    assert run.outcome == "success", run.stderr
    [deployment] = world.github.deployments
    sha = run.steps["run"].env["GITHUB_SHA"]
    assert deployment.environment == ENV
    assert deployment.request == {
        "ref": sha,
        "environment": ENV,
        "auto_merge": False,
        "required_contexts": [],
        "description": "screeps-gitops apply of local/main",
        "payload": {"server": "local", "branch": "main"},
        "transient_environment": False,
    }
    [status] = deployment.statuses
    assert status["state"] == "success"
    assert status["log_url"] == RUN_URL_PREFIX + run.steps["run"].env["GITHUB_RUN_ID"]
    assert status["auto_inactive"] is False
    assert f"Deployment recorded: {ENV} at {sha[:7]}, success" in run.stdout
    assert warnings(run.stdout) == []
    assert_no_secret(world, run)


def test_the_next_deploy_marks_the_earlier_ones_inactive_across_pages_and_stops_at_an_inactive_one(
    world: World,
) -> None:
    # History: 130 old deployments already inactive, then three still active (a success, a failure, a success),
    # and another environment's, which is never touched.
    for _ in range(130):
        world.github.add_deployment(ENV, state="inactive")
    active = [world.github.add_deployment(ENV, state=s) for s in ("success", "failure", "success")]
    other = world.github.add_deployment("screeps/local/season", state="success")
    # Pages of 2: the walk follows the next links (the client asks for 100; the fake is told to serve 2 a page).
    world.github.page_size = 2

    run = world.push(DEPLOY)
    assert run.outcome == "success", run.stderr
    new = world.github.deployments[-1]
    assert new.state == "success"
    assert [d.state for d in active] == ["inactive"] * 3
    assert other.state == "success"
    assert "success; 3 earlier marked inactive" in run.stdout
    # It stopped at the first inactive one: two pages of the list, not 67.
    lists = [p for m, p, _ in world.github.requests if m == "GET" and p.endswith("/deployments")]
    assert len(lists) == 3
    assert all(d.statuses == [{"state": "inactive"}] for d in world.github.in_environment(ENV)[:130])


def test_a_deploy_that_changes_nothing_records_nothing(world: World) -> None:
    assert world.push(DEPLOY).outcome == "success"
    assert len(world.github.deployments) == 1
    again = world.push(DEPLOY)
    assert again.outcome == "success", again.stderr
    assert len(world.github.deployments) == 1
    assert "Deployment recorded" not in again.stdout


def test_a_plan_or_a_pull_request_records_nothing(world: World) -> None:
    world.push(DEPLOY)
    world.write({"src/main.js": "module.exports.loop = () => 2;\n"})
    world.pull_request(PLAN)
    world.push(PLAN)
    assert len(world.github.deployments) == 1


def test_a_failed_deploy_is_recorded_as_failure_and_leaves_the_earlier_one_active(world: World) -> None:
    assert world.push(DEPLOY).outcome == "success"
    [first] = world.github.deployments
    world.write({"src/main.js": "module.exports.loop = () => 3;\n"})
    world.standin.inject_fault("POST /api/user/code", "500", count=2)  # retried once, so it fails for good

    run = world.push(DEPLOY)
    assert run.outcome == "failure"
    assert run.outputs["exit-code"] == "1"
    second = world.github.deployments[-1]
    assert second.state == "failure"
    assert second.statuses[0]["log_url"].startswith(RUN_URL_PREFIX)
    assert first.state == "success", "the server still runs the earlier deploy's code"


def test_without_permission_one_warning_and_the_deploy_succeeds(world: World) -> None:
    world.github.read_only = True
    run = world.push(DEPLOY)
    assert run.outcome == "success", run.stderr
    assert run.outputs["exit-code"] == "0"
    [warning] = warnings(run.stdout)
    assert "the deployments were not recorded: GitHub refused to record a deployment to screeps/local/main: 403" in (
        warning
    )
    assert "deployments: write" in warning


@pytest.mark.parametrize("failing", ["create", "status", "list"])
def test_a_failing_api_is_one_warning_and_never_changes_the_result(world: World, failing: str) -> None:
    world.github.deployment_errors[failing] = 502
    run = world.push(DEPLOY)
    assert run.outcome == "success", run.stderr
    assert run.outputs["exit-code"] == "0"
    assert run.outputs["has-changes"] == "true"
    [warning] = warnings(run.stdout)
    assert "the deployments were not recorded, or not all of them: GitHub refused to" in warning
    assert ": 502 " in warning


def test_two_branches_get_two_environments(world: World) -> None:
    manifest = (world.root / "gitops.yaml").read_text(encoding="utf-8")
    world.write(
        {
            "gitops.yaml": manifest.rstrip("\n") + "\n- server: local\n  branch: season\n  root: src\n",
        }
    )
    run = world.push(DEPLOY)
    assert run.outcome == "success", run.stderr
    assert sorted(d.environment for d in world.github.deployments) == [ENV, "screeps/local/season"]


def test_environment_names_keep_to_what_github_takes() -> None:
    assert deployment_environment("main", "default") == "screeps/main/default"
    assert deployment_environment("my server", "a,b;c") == "screeps/my-server/a-b-c"
    assert len(deployment_environment("s", "b" * 400)) == 255
