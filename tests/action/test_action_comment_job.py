"""The third job of the rehearsal workflow: ``command: comment`` writes the rehearsal's section of the pull request's
one comment from the result file the rehearse job wrote, in a job with no checkout at all, beside the section that
the plan workflow's job writes; neither write loses the other's section."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gitops.edges.rehearsalfile import write_result
from gitops.github.api import marker
from gitops.github.sections import parse
from gitops.standin.testing import StandIn
from tests.action.fake_github import GITHUB_TOKEN
from tests.action.runner import ActionRun, Runner
from tests.action.test_action import DEPLOY, World, make_world, pull_request_event
from tests.edges.test_rehearsalfile import result

MARK = marker("gitops.yaml")


@pytest.fixture
def world(tmp_path: Path, standin: StandIn) -> World:
    return make_world(tmp_path, standin)


def comment_job(world: World, tmp_path: Path, with_: dict[str, str]) -> ActionRun:
    """The comment job: a runner whose workspace is empty (no actions/checkout), for pull request #7."""
    empty = tmp_path / "empty-workspace"
    empty.mkdir(exist_ok=True)
    scratch = tmp_path / f"comment-job-{len(list(tmp_path.glob('comment-job-*')))}"
    scratch.mkdir()
    runner = Runner(empty, scratch, {}, world.runner.cache, github_token=GITHUB_TOKEN)
    sha = "a" * 40
    env = world.job_env("pull_request", pull_request_event(7, sha), sha)
    return runner.use(with_, job_env=env, in_process=world._how())


def test_the_comment_job_writes_the_rehearsal_beside_the_plan_and_a_later_plan_keeps_it(
    world: World, tmp_path: Path
) -> None:
    world.push(DEPLOY)
    world.write({"src/role/harvester.js": "module.exports.run = () => {\n  // harvest faster\n};\n"})
    assert world.pull_request({"command": "plan"}).outcome == "success"
    path = tmp_path / "artifact" / "rehearsal.json"
    write_result(path, result())

    run = comment_job(world, tmp_path, {"command": "comment", "rehearsal-file": str(path)})

    assert run.outcome == "success", run.stderr + run.stdout  # the rehearse job's verdict fails that job, not this
    assert run.outputs["rehearsal"] == "failing"
    assert run.outputs["exit-code"] == "9"
    for step in ("build", "restore", "private-server", "ledger", "save"):
        assert run.steps[step].outcome == "skipped", step  # nothing of a repository built, no ledger, no world
    [body] = world.comments()
    sections = parse(body, MARK)
    assert set(sections) == {"plan", "rehearsal"}
    assert "| `local` | `main` | update |" in sections["plan"]
    assert "### ❌ Rehearsal: failing" in sections["rehearsal"]
    assert "CPU per tick of `local/main` (grey: base, red: pull request):" in sections["rehearsal"]
    assert "```mermaid\n" in sections["rehearsal"]
    assert "**new**: ``Error: boom `x` @alice at main:1 (4 ticks)``" in sections["rehearsal"]  # an inert code span
    assert "Rehearsal" not in sections["plan"]

    # The next push's plan writes its own section and keeps the rehearsal's.
    world.write({"src/role/harvester.js": "module.exports.run = () => {\n  // harvest fastest\n};\n"})
    assert world.pull_request({"command": "plan"}).outcome == "success"
    [body] = world.comments()
    again = parse(body, MARK)
    assert again["rehearsal"] == sections["rehearsal"]
    assert again["plan"] != sections["plan"]


def test_a_result_file_that_cannot_be_read_fails_the_comment_job_and_says_so_in_its_section(
    world: World, tmp_path: Path
) -> None:
    path = tmp_path / "rehearsal.json"
    path.write_text(json.dumps({"format": "something else"}), encoding="utf-8")
    run = comment_job(world, tmp_path, {"command": "comment", "rehearsal-file": str(path)})
    assert run.outcome == "failure"
    assert run.outputs["exit-code"] == "6"
    [body] = world.comments()
    section = parse(body, MARK)["rehearsal"]
    assert "**The rehearsal failed** (exit code 6):" in section
    assert "is not a screeps-gitops rehearsal result" in section

    missing = comment_job(world, tmp_path, {"command": "comment"})
    assert missing.outcome == "failure"
    assert "input 'rehearsal-file' (GITOPS_ACTION_REHEARSAL_FILE) is ''" in missing.stderr


def test_a_rehearsal_that_stopped_shows_why_in_its_section_not_the_last_pushs_result(
    world: World, tmp_path: Path
) -> None:
    path = tmp_path / "rehearsal.json"
    write_result(path, result())
    assert comment_job(world, tmp_path, {"command": "comment", "rehearsal-file": str(path)}).outcome == "success"
    stopped = replace(result(), branches=(), error="the private server did not start: `node` @alice", error_code=14)
    write_result(path, stopped)

    run = comment_job(world, tmp_path, {"command": "comment", "rehearsal-file": str(path)})

    assert run.outcome == "success", run.stderr
    assert run.outputs["exit-code"] == "14"
    [body] = world.comments()
    section = parse(body, MARK)["rehearsal"]
    assert "**The rehearsal failed** (exit code 14):" in section
    assert "the private server did not start: `node` @alice" in section  # inside a fence: inert
    assert "Rehearsal: failing" not in section, "the older result is gone"
