"""Issue 37: the deploy token never follows what a pull request, a build or the step's environment can write.

The Action as the runner runs it (tests/action/runner.py) against the real stand-in; a second stand-in plays the
host a hostile pull request names, and counts what reaches it."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import yaml

from gitops.standin.testing import ALICE, DEMO_ACCOUNTS, FULL_TOKEN, StandIn, running_standin
from tests.action.runner import ActionRun
from tests.action.test_action import DEPLOY, PLAN, REPO, World, make_world, pull_request_event
from tests.factories import git

BRANCHES = "GET /api/user/branches"


@pytest.fixture
def world(tmp_path: Path, standin: StandIn) -> World:
    return make_world(tmp_path, standin)


def _another(world: World, folder: Path) -> contextlib.AbstractContextManager[StandIn]:
    """A second stand-in on another loopback port: the host a pull request names, or a second server."""
    folder.mkdir()
    return running_standin(DEMO_ACCOUNTS, folder / "standin.sqlite3", clock=world.standin.clock)


UPLOAD = "POST /api/user/code"


def _edit_manifest(world: World, **server: object) -> None:
    path = world.root / "gitops.yaml"
    data = yaml.safe_load(path.read_text("utf-8"))
    data["servers"]["local"].update(server)
    path.write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")


def _requests(standin: StandIn) -> int:
    return sum(standin.count(e) for e in (BRANCHES, UPLOAD, "GET /api/user/code", "GET /api/auth/me"))


def test_a_pull_request_that_moves_the_url_gets_no_request_with_the_token(world: World, tmp_path: Path) -> None:
    world.commit("base")
    with _another(world, tmp_path / "elsewhere") as elsewhere:
        _edit_manifest(world, url=elsewhere.url)
        run = world.pull_request({**PLAN, "refresh": "auto"})
        assert run.outcome == "failure"
        assert run.outputs["exit-code"] == "13"
        assert _requests(elsewhere) == 0, "the token went where the pull request said"
    assert _requests(world.standin) == 0
    assert "changes where credentials go" in run.stderr
    assert f"server 'local' url: '{world.standin.url}' → '{elsewhere.url}'" in run.stderr
    [body] = world.comments()
    assert "This pull request changes where credentials go" in body
    # The servers' table shows the old url beside the new one (issue 45), not the new one alone.
    assert f"| `local` | `{elsewhere.url}` (was `{world.standin.url}`) |" in body


def test_a_pull_request_that_adds_a_build_or_renames_the_secret_is_refused_with_a_token(world: World) -> None:
    world.commit("base")
    original = (world.root / "gitops.yaml").read_text("utf-8")
    _edit_manifest(world, token_env="OTHER_TOKEN")
    run = world.pull_request({**PLAN, "token-env": "OTHER_TOKEN", "refresh": "auto"})
    assert run.outputs["exit-code"] == "13", run.stderr
    assert "server 'local' token_env: 'SCREEPS_TOKEN' → 'OTHER_TOKEN'" in run.stderr

    data = yaml.safe_load(original)
    data["branches"][0]["build"] = "echo built"
    (world.root / "gitops.yaml").write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    run = world.pull_request({**PLAN, "refresh": "auto"})
    assert run.outputs["exit-code"] == "13", run.stderr
    assert "branch local/main build: (none) → 'echo built'" in run.stderr
    assert _requests(world.standin) == 0


def test_an_unchanged_manifest_is_planned_with_the_token(world: World) -> None:
    world.commit("base")
    world.write({"src/main.js": "module.exports.loop = () => 1;\n"})
    run = world.pull_request({**PLAN, "refresh": "auto"})
    assert run.outcome == "success", run.stderr
    assert run.outputs["exit-code"] == "2"
    assert world.standin.count(BRANCHES) == 1
    [body] = world.comments()
    assert "unchanged from the base branch's manifest" in body


def test_the_base_manifest_comes_from_github_when_the_checkout_lacks_the_base_commit(
    world: World, tmp_path: Path
) -> None:
    """actions/checkout fetches one commit: the base commit is then read through the contents API."""
    base = "c" * 40  # not in the checkout
    original = (world.root / "gitops.yaml").read_bytes()
    world.github.files[(base, "gitops.yaml")] = original
    head = world.commit("pull request change")
    event = pull_request_event(7, head, base_sha=base)

    def plan() -> ActionRun:
        env = world.job_env("pull_request", event, "m" * 40)
        return world.runner.use({**PLAN, "refresh": "auto"}, job_env=env, in_process=world._how())

    assert plan().outputs["exit-code"] == "2"
    with _another(world, tmp_path / "elsewhere") as elsewhere:
        _edit_manifest(world, url=elsewhere.url)
        run = plan()
        assert run.outputs["exit-code"] == "13"
        assert _requests(elsewhere) == 0
    # Unknown base (no such file at the base commit): refused with the token, never guessed.
    del world.github.files[(base, "gitops.yaml")]
    git(world.root, "checkout", "-q", "gitops.yaml")
    run = plan()
    assert run.outputs["exit-code"] == "13"
    assert "could not be compared with the base branch's" in run.stderr


def test_a_token_in_the_steps_env_is_refused_and_never_used(world: World) -> None:
    """The step's env: reaches every step of the action, the build step too: credentials come by inputs only."""
    sha = world.commit("deploy")
    env = world.job_env("push", {"ref": "refs/heads/main", "after": sha, "repository": {"full_name": REPO}}, sha)
    env["SCREEPS_TOKEN"] = FULL_TOKEN
    run = world.runner.use({"command": "apply"}, job_env=env, in_process=world._how())
    assert run.outputs["exit-code"] == "13"
    assert "SCREEPS_TOKEN is set in the step's environment" in run.stderr
    assert "credentials: SCREEPS_TOKEN=" in run.stderr
    assert _requests(world.standin) == 0
    assert FULL_TOKEN[:8] not in run.stderr


def test_a_token_both_in_env_and_in_the_input_is_used_from_the_input_with_a_warning(world: World) -> None:
    sha = world.commit("deploy")
    env = world.job_env("push", {"ref": "refs/heads/main", "after": sha, "repository": {"full_name": REPO}}, sha)
    env["SCREEPS_TOKEN"] = "not-the-token-but-in-reach-of-the-build"
    run = world.runner.use(DEPLOY, job_env=env, in_process=world._how())
    assert run.outcome == "success", run.stderr
    [warning] = [line for line in run.stdout.splitlines() if line.startswith("::warning ")]
    assert "SCREEPS_TOKEN is also set in the job's or step's env:" in warning


def test_extra_credentials_come_by_the_credentials_input(world: World, tmp_path: Path) -> None:
    with _another(world, tmp_path / "season") as season:
        path = world.root / "gitops.yaml"
        data = yaml.safe_load(path.read_text("utf-8"))
        data["servers"]["season"] = {"url": season.url, "token_env": "SEASON_TOKEN"}
        data["branches"].append({"server": "season", "branch": "main", "root": "src"})
        path.write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
        run = world.push({**DEPLOY, "credentials": f"SEASON_TOKEN={FULL_TOKEN}\n"})
        assert run.outcome == "success", run.stderr
        assert season.branch_modules(ALICE, "main") is not None
        assert world.standin.branch_modules(ALICE, "main") is not None
    bad = world.push({**DEPLOY, "credentials": f"not a pair {FULL_TOKEN}"})
    assert bad.outputs["exit-code"] == "4"
    assert "line 1 is not NAME=value" in bad.stderr
    assert FULL_TOKEN[:8] not in bad.stderr


def test_two_jobs_the_build_job_holds_no_secret_and_the_deploy_job_runs_no_repository_code(world: World) -> None:
    """The boundary is a job: `command: build` writes the code set; the deploy job, with the token, takes it and
    runs no build (the build script is gone from its checkout: any build would fail)."""
    world.write(
        {
            "build.sh": "mkdir -p dist/role && sed 's/$/ \\/\\/ built/' src/main.js > dist/main.js"
            " && cp src/role/harvester.js dist/role/\n",
            ".gitignore": "dist/\n",
        }
    )
    data = yaml.safe_load((world.root / "gitops.yaml").read_text("utf-8"))
    data["branches"][0].update({"root": "dist", "build": "sh build.sh"})
    (world.root / "gitops.yaml").write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    sha = world.commit("build")
    env = world.job_env("push", {"ref": "refs/heads/main", "after": sha, "repository": {"full_name": REPO}}, sha)

    built = world.runner.use({"command": "build"}, job_env=env, in_process=world._how())
    assert built.outcome == "success", built.steps["build"].stderr
    assert "SCREEPS_TOKEN" not in json.dumps(built.steps["build"].env)
    codeset = Path(built.outputs["codeset-file"])
    assert json.loads(codeset.read_text("ascii"))["commit"] == sha
    assert built.steps["run"].outcome == "skipped"

    # The deploy job: a fresh checkout at the same commit, without the build's output or its script.
    (world.root / "build.sh").unlink()
    (world.root / "dist" / "main.js").unlink()
    (world.root / "dist" / "role" / "harvester.js").unlink()
    deployed = world.runner.use({**DEPLOY, "codeset": str(codeset)}, job_env=env, in_process=world._how())
    assert deployed.outcome == "success", deployed.stderr
    assert deployed.steps["build"].outcome == "skipped"
    modules = world.standin.branch_modules(ALICE, "main")
    assert modules is not None
    assert str(modules["main"]).endswith(" // built\n")


def test_the_old_token_input_still_works_with_a_warning_and_a_github_token_is_refused(world: World) -> None:
    """Issue 41: `token` means the GitHub token to most actions; a habitual `token: ${{ secrets.GITHUB_TOKEN }}`
    sent a GitHub token to the game server. The Screeps token is `screeps-token`; `token` is its old name for one
    release, and a GitHub token in either is refused before anything is sent."""
    old = world.push({"command": "apply", "token": FULL_TOKEN})
    assert old.outcome == "success", old.stderr
    [warning] = [line for line in old.stdout.splitlines() if line.startswith("::warning ")]
    assert "input 'token' is the old name of 'screeps-token'" in warning
    github_token = "ghs_" + "x" * 36
    refused = world.push({"command": "apply", "screeps-token": github_token})
    assert refused.outputs["exit-code"] == "4"
    assert "holds a GitHub token, not a Screeps token" in refused.stderr
    shown = [line for line in (refused.stdout + refused.stderr).splitlines() if not line.startswith("::add-mask::")]
    assert github_token not in "\n".join(shown) + refused.summary
    both = world.push({"command": "apply", "screeps-token": FULL_TOKEN, "token": FULL_TOKEN})
    assert both.outputs["exit-code"] == "4"
