"""``command: rehearse`` in the Action: a fork's pull request (no secret at all) gets the rehearsal of its code
against its base commit in the plan comment, one table, on the real private server (the suite's install, given to
the job as ``GITOPS_PRIVATE_SERVER``: the action's cache steps then have nothing to save)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from gitops.standin.testing import StandIn
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
