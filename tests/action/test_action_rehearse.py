"""``command: rehearse`` in the Action: a fork's pull request (no secret at all) gets the rehearsal of its code
against its base commit in the plan comment, one table, on the real private server (the suite's install, given to
the job as ``GITOPS_PRIVATE_SERVER``: the action's cache steps then have nothing to save)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import yaml

from gitops.github.api import marker
from gitops.github.sections import parse
from gitops.standin.testing import StandIn
from tests.action.fake_github import GITHUB_TOKEN
from tests.action.runner import Runner
from tests.action.test_action import make_world, pull_request_event
from tests.private.harness import ROOT, install_problem

pytestmark = pytest.mark.private_server

INSTALL = Path(os.environ.get("PRIVATE_SERVER_DIR", ROOT / ".private-server"))
BROKEN = "module.exports.loop = () => {\n  throw new Error('the pull request broke it');\n};\n"


def test_a_forks_pull_request_gets_base_vs_pull_request_in_the_plan_comment_without_a_secret(
    tmp_path: Path, standin: StandIn
) -> None:
    problem = install_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    world = make_world(tmp_path, standin)
    base = world.commit("the healthy base")
    world.write({"src/main.js": BROKEN})
    head = world.commit("the pull request")
    event = pull_request_event(7, head, head_repo="bob/bot")
    event["pull_request"]["base"]["sha"] = base
    env = world.job_env("pull_request", event, head)
    env["GITOPS_PRIVATE_SERVER"] = str(INSTALL)
    run = world.runner.use({"command": "rehearse", "rehearse-ticks": "10"}, job_env=env, in_process=world._how())

    assert run.outcome == "failure", run.stderr + run.stdout
    assert run.outputs["rehearsal"] == "failing"
    assert run.outputs["exit-code"] == "9"
    # No secret anywhere in the step: none was given, none was needed, nothing asked the game server.
    given = run.steps["run"].env
    assert not given.get("GITOPS_ACTION_TOKEN")
    assert not given.get("GITOPS_ACTION_PASSWORD")
    for endpoint in ("GET /api/user/branches", "GET /api/user/code", "POST /api/user/code", "GET /api/auth/me"):
        assert standin.count(endpoint) == 0, endpoint
    [body] = world.comments()
    assert body.count("| branch | | base | pull request |") == 1
    assert "| `local/main` | result | HEALTHY | FAILING |" in body
    assert "|  | failed ticks | 0 of 10 | 10 of 10 |" in body
    assert "CPU per tick, mean" in body
    assert "**new**: `Error: the pull request broke it at main:2 (10 ticks)`" in body
    assert "| `local` | `main` |" in body  # the plan's table is in the same comment
    # The install's cache key: the lock's digest (and the OS, architecture and Node.js ABI it was built for).
    lock = hashlib.sha256((ROOT / "scripts/private-server/package-lock.json").read_bytes()).hexdigest()[:16]
    key = run.steps["private-server"].outputs["key"]
    assert key.startswith("screeps-private-server-")
    assert key.endswith(f"-{lock}")
    # This job holds the GitHub token (its comment): it unpacks no cache entry (tar -P), and saves what it installed.
    assert run.steps["private-server-restore"].outcome == "skipped"
    assert run.steps["private-server-save"].outcome == "success"  # nothing to save: a warning, not a failure
    assert world.runner.cache.warnings == [
        f"Path Validation Error: {run.runner_temp}/screeps-gitops-cache/private-server does not exist"
    ]


def test_the_rehearsal_in_three_jobs_builds_apart_rehearses_without_a_token_and_comments_from_the_result(
    tmp_path: Path, standin: StandIn
) -> None:
    """examples/workflows/rehearse.yml, job by job: the build job writes the head's and the base's code sets (the
    manifest's build runs there only), the rehearse job runs them with no token and no build, and the comment job
    (no checkout) writes the rehearsal's section beside the plan's."""
    problem = install_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    world = make_world(tmp_path, standin)
    manifest = yaml.safe_load((world.root / "gitops.yaml").read_text(encoding="utf-8"))
    manifest["branches"][0]["build"] = "echo built >> build-ran.log"  # the repository's code, as a build runs it
    (world.root / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    (world.root / ".gitignore").write_text("build-ran.log\n", encoding="utf-8")
    base = world.commit("the healthy base")
    world.write({"src/main.js": BROKEN})
    head = world.commit("the pull request")
    event = pull_request_event(7, head, head_repo="bob/bot", base_sha=base)
    env = world.job_env("pull_request", event, head)
    env["GITOPS_PRIVATE_SERVER"] = str(INSTALL)
    artifacts = tmp_path / "artifacts"

    built = world.runner.use({"command": "build"}, job_env=env)
    built_base = world.runner.use(
        {"command": "build", "ref": base, "codeset": str(artifacts / "screeps-gitops-base-codeset.json")}, job_env=env
    )
    assert built.outcome == built_base.outcome == "success", built.stderr + built_base.stderr
    head_set = artifacts / "screeps-gitops-codeset.json"
    head_set.write_bytes(Path(built.outputs["codeset-file"]).read_bytes())
    assert (world.root / "build-ran.log").read_text() == "built\n"  # the base was built in a checkout of its own

    rehearsal = world.runner.use(
        {
            "command": "rehearse",
            "codeset": str(head_set),
            "base-codeset": str(artifacts / "screeps-gitops-base-codeset.json"),
            "rehearse-ticks": "5",
            "github-token": "",
            "cache": "false",
        },
        job_env=env,
        in_process=world._how(),
    )

    assert rehearsal.outcome == "failure", rehearsal.stderr + rehearsal.stdout
    assert rehearsal.outputs["rehearsal"] == "failing"
    assert rehearsal.outputs["exit-code"] == "9"
    assert rehearsal.steps["build"].outcome == "skipped"
    assert (world.root / "build-ran.log").read_text() == "built\n", "no build ran in the rehearse job"
    given = rehearsal.steps["run"].env
    assert given["GITOPS_GITHUB_TOKEN"] == ""
    assert not given.get("GITOPS_ACTION_SCREEPS_TOKEN")
    assert world.github.requests == [], "the rehearse job asked nothing of GitHub and commented nothing"
    assert standin.count("GET /api/user/branches") == 0
    result_file = Path(rehearsal.outputs["rehearsal-file"])
    assert result_file.name == "rehearsal.json"
    handed_on = artifacts / "rehearsal" / "rehearsal.json"
    handed_on.parent.mkdir()
    handed_on.write_bytes(result_file.read_bytes())

    planned = world.runner.use({"command": "plan", "codeset": str(head_set)}, job_env=env, in_process=world._how())
    assert planned.outcome == "success", planned.stderr
    empty = tmp_path / "no-checkout"
    empty.mkdir()
    commenter = Runner(empty, tmp_path / "comment-job", {}, world.runner.cache, github_token=GITHUB_TOKEN)
    (tmp_path / "comment-job").mkdir()
    commented = commenter.use(
        {"command": "comment", "rehearsal-file": str(handed_on)}, job_env=env, in_process=world._how()
    )
    assert commented.outcome == "success", commented.stderr
    [body] = world.comments()
    sections = parse(body, marker("gitops.yaml"))
    assert "| `local` | `main` |" in sections["plan"]
    rehearsal_section = sections["rehearsal"]
    assert "| `local/main` | result | HEALTHY | FAILING |" in rehearsal_section
    assert "**new**: `Error: the pull request broke it at main:2 (5 ticks)`" in rehearsal_section
    assert rehearsal_section.count("    line [") == 2  # base and pull request, in the chart beside the table
