"""The GitHub Action end to end: action.yml's steps run as the runner runs them (tests/action/runner.py), against
the real stand-in over loopback, with the GitHub comments API answered by a fake at the httpx transport seam."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops.edges.clock import ManualClock
from gitops.github.api import COMMENT_LIMIT, marker
from gitops.github.report import SUMMARY_LIMIT_BYTES
from gitops.github.sections import parse
from gitops.standin.testing import ALICE, DEMO_ACCOUNTS, FULL_TOKEN, StandIn, running_standin
from tests.action.fake_github import GITHUB_TOKEN, FakeGitHub, serve_on_loopback
from tests.action.runner import ActionRun, CacheStore, InProcess, Runner, run_bash
from tests.factories import git
from tests.project import add_server_only_binary, spend

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workflows"
UPLOAD = "POST /api/user/code"
DOWNLOAD = "GET /api/user/code"
REPO = "alice/bot"
BOT = {
    "src/main.js": "const harvester = require('role/harvester');\nmodule.exports.loop = () => harvester.run();\n",
    "src/role/harvester.js": "module.exports.run = () => {\n  // harvest\n};\n",
}
LINK_PATH = "/a/#!/account/auth-tokens/noratelimit?token="


def pull_request_event(
    number: int, head_sha: str, *, head_repo: str = REPO, base_repo: str = REPO, base_sha: str = "b" * 40
) -> dict[str, Any]:
    """A ``pull_request`` event payload in the shape GitHub sends (the fields the tool reads, and their kin)."""

    def repo(full_name: str) -> dict[str, Any]:
        owner = full_name.split("/", maxsplit=1)[0]
        return {
            "id": abs(hash(full_name)) % 10**8,
            "name": full_name.split("/")[1],
            "full_name": full_name,
            "private": False,
            "owner": {"login": owner, "type": "User"},
            "fork": full_name != REPO,
            "default_branch": "main",
            "html_url": f"https://github.com/{full_name}",
        }

    return {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "url": f"https://api.github.com/repos/{REPO}/pulls/{number}",
            "id": 1_234_567,
            "number": number,
            "state": "open",
            "title": "Harvest faster",
            "user": {"login": head_repo.split("/", maxsplit=1)[0], "type": "User"},
            "draft": False,
            "head": {
                "label": f"{head_repo.split('/', maxsplit=1)[0]}:faster",
                "ref": "faster",
                "sha": head_sha,
                "repo": repo(head_repo),
            },
            "base": {"label": "alice:main", "ref": "main", "sha": base_sha, "repo": repo(base_repo)},
            "author_association": "OWNER" if head_repo == base_repo else "CONTRIBUTOR",
        },
        "repository": repo(base_repo),
        "sender": {"login": head_repo.split("/", maxsplit=1)[0], "type": "User"},
    }


@dataclass
class World:
    """A player's repository, the stand-in, GitHub's comments and cache, and a runner for the action."""

    root: Path
    standin: StandIn
    github: FakeGitHub
    runner: Runner
    scratch: Path
    #: Seconds each request to GitHub may take in in-process runs (the client's default when None).
    github_timeout: float | None = None

    def write(self, files: dict[str, str]) -> None:
        for name, content in files.items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")

    def commit(self, message: str = "change") -> str:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "--allow-empty", "-m", message)
        return git(self.root, "rev-parse", "HEAD").strip()

    def job_env(self, event_name: str, event: dict[str, Any], sha: str) -> dict[str, str]:
        path = self.scratch / f"event-{len(list(self.scratch.glob('event-*')))}.json"
        path.write_text(json.dumps(event), encoding="utf-8")
        return {
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_NAME": event_name,
            "GITHUB_EVENT_PATH": str(path),
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": self.github.base_url,
            "GITHUB_SERVER_URL": "https://github.example.test",
            "GITHUB_SHA": sha,
            "GITHUB_JOB": "gitops",
            "GITHUB_WORKFLOW": "screeps",
        }

    def push(self, with_: dict[str, str], *, in_process: bool = True, hand_on: bool = True) -> ActionRun:
        """A job on a push; with ``hand_on`` (and the cache on), the ledger comes from a credential-free job that
        restored the cache, as in the example workflows (:meth:`handed_ledger`): a job with a credential unpacks no
        cache entry itself."""
        sha = self.commit("deploy")
        env = self.job_env("push", {"ref": "refs/heads/main", "after": sha, "repository": {"full_name": REPO}}, sha)
        return self.runner.use(self.handed_ledger(with_, env, hand_on), job_env=env, in_process=self._how(in_process))

    def pull_request(
        self,
        with_: dict[str, str],
        *,
        number: int = 7,
        fork: bool = False,
        in_process: bool = True,
        hand_on: bool = True,
    ) -> ActionRun:
        # The base: what the branch held before this pull request's commit (the first commit: itself).
        base = git(self.root, "rev-parse", "--verify", "--quiet", "HEAD").strip() if self._has_commit() else ""
        sha = self.commit("pull request change")
        event = pull_request_event(number, sha, head_repo="bob/bot" if fork else REPO, base_sha=base or sha)
        env = self.job_env("pull_request", event, "m" * 40)
        return self.runner.use(self.handed_ledger(with_, env, hand_on), job_env=env, in_process=self._how(in_process))

    def handed_ledger(self, with_: dict[str, str], env: dict[str, str], hand_on: bool = True) -> dict[str, str]:
        """``with_`` plus the ledger input: the artifact of examples/workflows/drift.yml's ``ledger`` job (the cache
        restored where no credential is), run before the job as ``needs:`` runs it."""
        if not hand_on or with_.get("cache", "true") != "true" or with_.get("codeset") or with_.get("ledger"):
            return dict(with_)
        handed = self.runner.workflow_job(EXAMPLES / "drift.yml", "ledger", job_env=env)["screeps-ledger"]
        return {**with_, "ledger": str(handed)}

    def _has_commit(self) -> bool:
        return (self.root / ".git").is_dir() and bool(
            subprocess.run(
                ["git", "rev-parse", "--verify", "--quiet", "HEAD"], cwd=self.root, capture_output=True, check=False
            ).stdout.strip()
        )

    def _how(self, in_process: bool = True) -> InProcess | None:
        if not in_process:
            return None
        return InProcess(
            clock=self.standin.clock, github_transport=self.github.transport, github_timeout=self.github_timeout
        )

    def comments(self, number: int = 7) -> list[str]:
        return [c.body for c in self.github.on(number)]


def make_world(tmp_path: Path, standin: StandIn) -> World:
    root = tmp_path / "bot"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    manifest = {
        "version": 1,
        "servers": {"local": {"url": standin.url, "token_env": "SCREEPS_TOKEN"}},
        "branches": [{"server": "local", "branch": "main", "root": "src", "activate": ["world"]}],
    }
    (root / "gitops.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    scratch = tmp_path / "runner"
    scratch.mkdir()
    cache = CacheStore(tmp_path / "cache")
    cache.root.mkdir()
    github = FakeGitHub(repository=REPO)
    world = World(root, standin, github, Runner(root, scratch, {}, cache, github_token=GITHUB_TOKEN), scratch)
    world.write(BOT)
    return world


@pytest.fixture
def world(tmp_path: Path, standin: StandIn) -> World:
    return make_world(tmp_path, standin)


DEPLOY = {"command": "apply", "screeps-token": FULL_TOKEN}
PLAN = {"command": "plan", "screeps-token": FULL_TOKEN}


def assert_no_secret(world: World, run: ActionRun) -> None:
    """The canary token (or its 8-character prefix) is nowhere but in ``::add-mask::`` commands."""
    for line in (run.stdout + run.stderr).splitlines():
        if FULL_TOKEN[:8] in line:
            assert line.startswith("::add-mask::"), line
    texts = {
        "summary": run.summary,
        "outputs": json.dumps(run.outputs),
        "comments": json.dumps(world.comments()),
        "requests to GitHub": json.dumps(world.github.requests),
    }
    plan_file = run.outputs.get("plan-file")
    if plan_file:
        texts["plan file"] = Path(plan_file).read_text(encoding="utf-8")
    for path in run.runner_temp.rglob("*"):
        if path.is_file():
            texts[str(path)] = path.read_text(encoding="utf-8", errors="replace")
    for step in run.steps.values():
        if "GITHUB_OUTPUT" in step.env:
            texts[f"{step.id} outputs file"] = Path(step.env["GITHUB_OUTPUT"]).read_text(encoding="utf-8")
    for where, text in texts.items():
        assert FULL_TOKEN[:8] not in text, f"the token shows in the {where}"


def test_deploy_on_push_applies_and_reports(world: World) -> None:
    run = world.push(DEPLOY)
    assert run.outcome == "success", run.stderr
    assert run.outputs == {
        "has-changes": "true",
        "exit-code": "0",
        "uploads-needed": "0",  # a new branch is created holding its modules
        "plan-file": run.outputs["plan-file"],
        "comment-url": "",
        "drifted": "",
        "issue-url": "",
        "health": "",
        "rolled-back": "",
        "codeset-file": "",
        "ledger-dir": "",
        "rehearsal": "",
        "rehearsal-file": "",
    }
    assert Path(run.outputs["plan-file"]).parent == run.runner_temp / "screeps-gitops"
    assert world.standin.branch_modules(ALICE, "main") == {
        "main": BOT["src/main.js"],
        "role/harvester": BOT["src/role/harvester.js"],
    }
    summary = run.summary
    assert summary.startswith("### screeps-gitops apply\n")
    assert "| `local` | `main` | create |" in summary
    assert "#### Apply" in summary
    assert "Applied: 1 branch(es) changed with 0 upload(s)" in summary
    assert world.github.others() == []  # no pull request to comment on (deployments: test_action_deployments.py)
    assert_no_secret(world, run)


def test_masks_come_first_and_cover_the_token_and_the_link(world: World) -> None:
    run = world.push(DEPLOY)
    lines = run.steps["run"].stdout.splitlines()
    masks = [line for line in lines if line.startswith("::add-mask::")]
    first_other = next(i for i, line in enumerate(lines) if not line.startswith("::add-mask::"))
    assert all(line.startswith("::add-mask::") for line in lines[:first_other])
    assert len(masks) == first_other, "every mask is printed before anything else"
    assert f"::add-mask::{FULL_TOKEN}" in masks
    assert f"::add-mask::{FULL_TOKEN[:8]}" in masks
    assert f"::add-mask::{world.standin.url}{LINK_PATH}{FULL_TOKEN}" in masks
    assert f"::add-mask::{GITHUB_TOKEN}" in masks
    assert len(masks) == len(set(masks)) == 4, "each once; no prefix of the link or the GitHub token"
    # The credentials reach the tool through the environment, never on a command line.
    assert FULL_TOKEN not in run.steps["run"].env.get("GITOPS_BIN", "")
    assert run.steps["run"].env["GITOPS_ACTION_SCREEPS_TOKEN"] == FULL_TOKEN


def test_pull_request_plan_comments_once_then_edits_it_in_place(world: World) -> None:
    world.push(DEPLOY)
    downloads = world.standin.count(DOWNLOAD)
    world.write({"src/role/harvester.js": "module.exports.run = () => {\n  // harvest faster\n};\n"})

    first = world.pull_request(PLAN)
    assert first.outcome == "success", first.stderr
    assert first.outputs["exit-code"] == "2"
    assert first.outputs["has-changes"] == "true"
    assert first.outputs["uploads-needed"] == "1"
    assert world.standin.count(DOWNLOAD) == downloads, "a plan on a pull request spends no download"
    [body] = world.comments()
    assert body.startswith(marker("gitops.yaml") + "\n")
    assert "| `local` | `main` | update |" in body
    assert "from this tool's own upload" in body
    assert "refresh: never" in body
    assert first.outputs["comment-url"].endswith(f"#issuecomment-{world.github.comments[0].id}")
    summary = first.summary
    assert summary.index("| server | branch | action |") < summary.index("~ role/harvester")
    assert "Planned from the ledger that the last deploy left" in summary
    assert "Plan comment created on pull request #7" in first.stdout

    world.write({"src/util.js": "module.exports.x = 1;\n"})
    second = world.pull_request(PLAN)
    assert second.outcome == "success", second.stderr
    [body2] = world.comments()
    assert "+ util" in body2
    assert world.github.writes() == [
        ("POST", f"/api/v3/repos/{REPO}/issues/7/comments"),
        ("PATCH", f"/api/v3/repos/{REPO}/issues/comments/{world.github.comments[0].id}"),
    ]
    assert "Plan comment updated on pull request #7" in second.stdout
    assert world.standin.count(UPLOAD) == 0, (
        "planning never uploads (and the deploy created the branch with its modules)"
    )
    assert_no_secret(world, first)
    assert_no_secret(world, second)


def test_refresh_auto_on_a_pull_request_reads_the_branch_list_and_shows_diffs(world: World) -> None:
    world.push(DEPLOY)
    world.standin.clock.advance(3600)  # past trust_own_upload_seconds: auto downloads again
    world.write({"src/role/harvester.js": "module.exports.run = () => {\n  // harvest faster\n};\n"})
    listings = world.standin.count("GET /api/user/branches")
    run = world.pull_request({**PLAN, "refresh": "auto"})
    assert run.outcome == "success", run.stderr
    assert world.standin.count(DOWNLOAD) == 0  # the branch list carries the modules: they are the download
    assert world.standin.count("GET /api/user/branches") == listings + 1
    summary = run.summary
    assert summary.index("| server | branch | action |") < summary.index(
        "<details><summary>diff of <code>role/harvester"
    )
    assert "+  // harvest faster" in summary
    assert "Planned from the ledger" not in summary


def test_fork_pull_request_plans_from_the_ledger_and_says_so(world: World) -> None:
    world.push(DEPLOY)
    world.github.read_only = True  # a fork's GITHUB_TOKEN cannot comment
    world.write({"src/main.js": "module.exports.loop = () => {};\n"})
    requests = world.standin.app.count("GET /api/user/branches", None)

    run = world.pull_request({"command": "plan", "screeps-token": ""}, fork=True)  # no secrets for forks

    assert run.outcome == "success", run.stderr
    assert run.outputs["exit-code"] == "2"
    assert run.outputs["has-changes"] == "true"
    assert world.standin.app.count("GET /api/user/branches", None) == requests
    plain = "This pull request comes from a fork, and GitHub gives no secrets to workflows of fork pull requests"
    assert plain in run.summary
    assert "The plan was made from the ledger alone (refresh: never)" in run.summary
    assert "| `local` | `main` | update |" in run.summary
    notice = next(line for line in run.stdout.splitlines() if line.startswith("::notice "))
    assert plain in notice
    [warning] = [line for line in run.stdout.splitlines() if line.startswith("::warning ")]
    assert "the plan comment was not posted (a fork's pull request gets a read-only token)" in warning
    assert "pull-requests: write" in warning
    assert "Secrets and variables" not in run.stdout + run.summary, "a fork cannot add secrets: no such advice"
    assert world.comments() == []
    assert_no_secret(world, run)


def test_fork_pull_request_with_an_empty_ledger_still_plans(world: World) -> None:
    run = world.pull_request({"command": "plan", "screeps-token": ""}, fork=True)
    assert run.outcome == "success", run.stderr
    assert run.outputs["exit-code"] == "2"
    assert "nothing is known of this branch on the server" in run.summary
    [body] = world.comments()
    assert "This pull request comes from a fork" in body


SECRET_ADVICE = (
    "No Screeps credentials in this run, so nothing was downloaded from the game server. server 'local': add the "
    "repository secret {name} and pass it to the step as `screeps-token: ${{{{ secrets.{name} }}}}`{extra}. Secrets "
    "are added in the repository's Settings → Secrets and variables → Actions (gitops help github-action)."
)


def test_same_repository_pull_request_without_the_secret_never_asks_for_it(world: World) -> None:
    """Issue 37: the pull request's plan told the user to give it the deploy token, which its build (and its
    manifest's url) could then take. A pull request's plan runs without it, and says that this is as it should be."""
    run = world.pull_request({"command": "plan", "screeps-token": ""})
    assert run.outcome == "success", run.stderr
    assert not [line for line in run.stdout.splitlines() if line.startswith("::warning ")]
    advice = "add the repository secret"
    assert advice not in run.summary
    assert "runs without the deploy token for server 'local', as it should" in run.summary
    [body] = world.comments()
    assert advice not in body
    assert f"| `local` | `{world.standin.url}` |" in body
    assert "unchanged from the base branch's manifest" in body


def test_the_warning_names_the_manifests_token_variable(world: World) -> None:
    manifest = yaml.safe_load((world.root / "gitops.yaml").read_text(encoding="utf-8"))
    manifest["servers"]["local"]["token_env"] = "BOT_DEPLOY_TOKEN"
    world.write({"gitops.yaml": yaml.safe_dump(manifest, sort_keys=False)})
    run = world.push({"command": "plan", "screeps-token": "", "token-env": "BOT_DEPLOY_TOKEN"})
    assert run.outcome == "success", run.stderr
    advice = SECRET_ADVICE.format(name="BOT_DEPLOY_TOKEN", extra=" with `token-env: BOT_DEPLOY_TOKEN`")
    [warning] = [line for line in run.stdout.splitlines() if line.startswith("::warning ")]
    assert warning == f"::warning title=screeps-gitops::{advice}"


def test_apply_without_credentials_fails_plainly(world: World) -> None:
    run = world.push({"command": "apply", "screeps-token": ""})
    assert run.outcome == "failure"
    assert run.outputs["exit-code"] == "7"
    assert run.outputs["has-changes"] == ""
    assert "Error: no credentials for server 'local': the environment variable SCREEPS_TOKEN is not set." in (
        run.stderr
    )
    assert "**Apply failed** (exit code 7):" in run.summary
    [warning] = [line for line in run.stdout.splitlines() if line.startswith("::warning ")]
    assert "add the repository secret SCREEPS_TOKEN" in warning
    assert "Settings → Secrets and variables → Actions" in warning
    assert run.steps["save"].outcome == "success", "the ledger is saved even when the step fails"


def test_bad_input_names_the_input(world: World) -> None:
    run = world.push({"command": "deploy", "screeps-token": FULL_TOKEN})
    assert run.outcome == "failure"
    assert run.outputs["exit-code"] == "4"
    assert run.outputs["has-changes"] == ""
    assert run.summary.startswith("### screeps-gitops plan\n")
    assert "**Planning failed** (exit code 4):" in run.summary
    assert (
        "Error: input 'command' (GITOPS_ACTION_COMMAND) is 'deploy'; it must be plan, apply, drift, rehearse or "
        "comment\n"
        "Fix the `with:` of the screeps-gitops step in the workflow" in run.stderr
    )


def test_budget_refusal_on_a_pull_request_is_shown_where_the_reviewer_looks(world: World) -> None:
    world.push(DEPLOY)
    for n in range(3):
        world.write({f"src/m{n}.js": f"// {n}\n"})
        assert world.push(DEPLOY).outcome == "success"
    world.write(
        {
            "gitops.yaml": (world.root / "gitops.yaml").read_text()
            + "budget:\n  reserve:\n    'POST /api/user/code': 237\n",
            "src/m0.js": "// changed\n",
        }
    )
    run = world.pull_request(PLAN)
    assert run.outcome == "failure"
    assert run.outputs["exit-code"] == "3"
    assert run.outputs["has-changes"] == "true"
    [body] = world.comments()
    assert "**The plan does not fit the token's rate limits; a deploy now would be refused** (exit code 3):" in body
    assert "DOES NOT FIT" in body
    assert_no_secret(world, run)


def test_huge_diffs_are_cut_to_fit_the_summary_and_the_comment(world: World) -> None:
    line = "x" * 400
    # Diffs of about 17,000 characters each: the comment's plan section (its limit less the 16,000 characters kept
    # for the rehearsal's section) holds one or more, the summary many.
    old = {f"src/big{n}.js": "\n".join(f"// {n} {i} {line}" for i in range(20)) + "\n" for n in range(80)}
    world.write(old)
    world.push(DEPLOY)
    # Every line changed, and still JavaScript that parses (the plan refuses to upload a module that does not).
    world.write({name: text.replace("// ", "//* ") for name, text in old.items()})
    run = world.pull_request({**PLAN, "refresh": "always"})
    assert run.outcome == "success", run.stderr
    summary = run.summary
    assert 600_000 < len(summary.encode("utf-8")) <= SUMMARY_LIMIT_BYTES
    assert summary.count("<details>") >= 10
    note = "_The plan was cut to fit GitHub's size limit; run `gitops plan` for the whole of it._"
    assert note in summary
    assert summary.index("| server | branch | action |") < summary.index("<details>")
    [body] = world.comments()
    assert 30_000 < len(body) <= COMMENT_LIMIT
    assert note in body
    assert parse(body, marker("gitops.yaml"))["plan"].rstrip().endswith("</sub>"), "the footer survives the cut"


def test_two_manifests_get_two_comments(world: World) -> None:
    world.push(DEPLOY)
    second = yaml.safe_load((world.root / "gitops.yaml").read_text())
    second["branches"][0]["branch"] = "sim"
    second["branches"][0]["activate"] = []
    world.write({"season.yaml": yaml.safe_dump(second)})
    world.pull_request(PLAN)
    world.pull_request({**PLAN, "manifest": "season.yaml"})
    world.pull_request({**PLAN, "manifest": "season.yaml"})
    bodies = world.comments()
    assert len(bodies) == 2
    assert {b.splitlines()[0] for b in bodies} == {marker("gitops.yaml"), marker("season.yaml")}


# --- the whole action in subprocesses, as on a runner ------------------------------------------------------------


@pytest.fixture
def live_standin(tmp_path: Path) -> Iterator[StandIn]:
    """A stand-in on the wall clock: the tool runs in a subprocess and reads the system clock."""
    data = tmp_path / "live"
    data.mkdir()
    with running_standin(DEMO_ACCOUNTS, data / "standin.sqlite3", clock=ManualClock(time.time())) as service:
        yield service


def test_the_whole_action_in_subprocesses_carries_the_ledger_through_the_cache(
    tmp_path: Path, live_standin: StandIn
) -> None:
    world = make_world(tmp_path, live_standin)
    with serve_on_loopback(world.github):
        deploy = world.push(DEPLOY, in_process=False)
        assert deploy.outcome == "success", deploy.stderr
        assert deploy.outputs["exit-code"] == "0"
        [key] = ledger_keys(world)
        assert key == ledger_key(deploy), "saved under the digest of the ledger the run left"
        # uv's packages: never from the cache in a job that holds a credential (any job on main can write it).
        assert deploy.steps["uv-restore"].outcome == deploy.steps["uv-save"].outcome == "skipped"
        assert [k for k in world.runner.cache.keys if k.startswith("screeps-gitops-uv-")] == []

        world.write({"src/role/harvester.js": "module.exports.run = () => 1;\n"})
        plan = world.pull_request(PLAN, in_process=False)
        assert plan.outcome == "success", plan.stderr
        # The ledger job restored the entry and handed it on; the plan job (the GitHub token) unpacked none.
        assert plan.steps["restore"].outcome == "skipped"
        assert plan.steps["seed"].outputs["key"] == key
        assert plan.outputs["exit-code"] == "2"
        assert plan.outputs["uploads-needed"] == "1"
        assert live_standin.count(DOWNLOAD) == 0
        assert "from this tool's own upload" in plan.summary
        [body] = world.comments()
        assert "| `local` | `main` | update |" in body
        # The plan sent no request: the ledger is what it restored, so no new entry (not one per run).
        assert ledger_key(plan) == key
        assert plan.steps["save"].outcome == "skipped"
        assert ledger_keys(world) == [key]
        assert plan.steps["uv-restore"].outcome == plan.steps["uv-save"].outcome == "skipped"
        assert world.runner.cache.warnings == []

        # The merge deploys: the ledger changes, so one new entry, which the next run restores.
        again = world.push(DEPLOY, in_process=False)
        assert again.outcome == "success", again.stderr
        assert again.steps["seed"].outputs["key"] == key
        assert ledger_keys(world) == [key, ledger_key(again)]
    assert_no_secret(world, deploy)
    assert_no_secret(world, plan)


def ledger_keys(world: World) -> list[str]:
    return [k for k in world.runner.cache.keys if k.startswith("screeps-gitops-ledger-")]


def ledger_key(run: ActionRun) -> str:
    """The key the ledger step computed, checked against the digest of the ledger files the run left."""
    key = run.steps["ledger"].outputs["key"]
    state = run.runner_temp / "screeps-gitops-state"
    digest = hashlib.sha256()
    files = sorted(state.rglob("*.json"))
    assert files, "the run left a ledger"
    for path in files:
        digest.update(path.relative_to(state).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    assert key == run.steps["state"].outputs["prefix"] + digest.hexdigest()[:32]
    assert key.startswith("screeps-gitops-ledger-")
    return key


def test_unlock_workflow_waits_for_the_unlimited_token_and_never_shows_the_link(
    tmp_path: Path, live_standin: StandIn
) -> None:
    """The wait step of examples/workflows/unlock.yml, run by bash against the stand-in."""
    workflow = yaml.safe_load((Path(__file__).parents[2] / "examples/workflows/unlock.yml").read_text())
    [step] = [s for s in workflow["jobs"]["unlock"]["steps"] if s.get("name") == "Wait until the token is unlimited"]
    world = make_world(tmp_path, live_standin)
    live_standin.grant_unlimited(FULL_TOKEN)  # what the person does in the browser
    summary = tmp_path / "summary.md"
    script = tmp_path / "wait.sh"
    script.write_text(step["run"], encoding="utf-8")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITOPS_", "SCREEPS_", "GITHUB_")) or k == "GITOPS_CACHE_DIR"
    }
    env.update(
        {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "GITOPS_STATE_DIR": str(tmp_path / "state"),
            "SCREEPS_TOKEN": FULL_TOKEN,
            "SERVER": "local",
            "WAIT_MINUTES": "1",
            "GITHUB_STEP_SUMMARY": str(summary),
        }
    )
    done = run_bash(script, cwd=world.root, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "unlimited: until" in done.stdout
    assert "The token for server 'local' is unlimited until" in done.stdout
    assert "run `gitops unlock --server local` and open the link it prints" in summary.read_text()
    for text in (done.stdout, done.stderr, summary.read_text()):
        assert FULL_TOKEN[:8] not in text
    ledgers = list((tmp_path / "state").rglob("*.json"))
    assert ledgers, "the unlimited period is recorded in the ledger that the deploy step then reads"
    until = [json.loads(p.read_text()).get("unlimited_until") for p in ledgers]
    assert any(u is not None and u > time.time() for u in until)

    env["WAIT_MINUTES"] = "1; id"
    refused = run_bash(script, cwd=world.root, env=env, timeout=60)
    assert refused.returncode == 1
    assert refused.stderr.strip() == "wait-minutes must be a whole number of minutes"


def test_apply_budgets_the_download_that_kept_modules_need(world: World) -> None:
    """The Action's apply counts the extra download of ``remote_only: keep`` as ``gitops apply`` does (the same
    use case): with none left it refuses with exit code 3 before anything is written."""
    assert world.push(DEPLOY).outcome == "success"
    add_server_only_binary(world.standin, "main")
    manifest = yaml.safe_load((world.root / "gitops.yaml").read_text(encoding="utf-8"))
    manifest["branches"][0]["remote_only"] = "keep"
    world.write({"gitops.yaml": yaml.safe_dump(manifest, sort_keys=False), "src/main.js": "// v2\n"})
    spend(world.standin, DOWNLOAD, 60 - world.standin.count(DOWNLOAD) - 1)  # one download left: the plan's own
    uploads, before = world.standin.count(UPLOAD), world.standin.branch_modules(ALICE, "main")

    run = world.push({**DEPLOY, "refresh": "always"})  # the plan's download says none remain

    assert run.outcome == "failure"
    assert run.outputs["exit-code"] == "3"
    assert "the plan needs 1 x GET /api/user/code but 0 of 60 per hour remain" in run.summary
    assert world.standin.count(DOWNLOAD) == 60  # the plan's download, and not one more
    assert (world.standin.count(UPLOAD), world.standin.branch_modules(ALICE, "main")) == (uploads, before)


# --- GitHub answers that are not JSON, links elsewhere -----------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("GET", b"<!DOCTYPE html><html><body>Sign in</body></html>"),
        ("GET", b'[{"id": 1, "body": "cut sh'),
        ("POST", b"<html><body>502 Bad Gateway</body></html>"),
        ("PATCH", b'{"id": 1000, "bo'),
    ],
)
def test_github_answering_200_that_is_not_json_is_a_warning_and_the_plan_still_shows(
    world: World, method: str, body: bytes
) -> None:
    world.push(DEPLOY)
    if method == "PATCH":
        world.write({"src/a.js": "// a\n"})
        assert world.pull_request(PLAN).outcome == "success"  # the comment to edit
    world.write({"src/role/harvester.js": "module.exports.run = () => {\n  // harvest faster\n};\n"})
    world.github.not_json[method] = body

    run = world.pull_request(PLAN)

    assert run.outcome == "success", run.stderr
    assert run.outputs["exit-code"] == "2", "the plan's exit code, not 70"
    assert run.outputs["has-changes"] == "true"
    assert run.outputs["comment-url"] == ""
    assert "| `local` | `main` | update |" in run.summary
    [warning] = [line for line in run.stdout.splitlines() if line.startswith("::warning ")]
    assert "the plan comment was not posted: GitHub answered 200 to " in warning
    assert f"with something that is not JSON (text/html, {len(body)} bytes)" in warning
    assert "Traceback" not in run.stdout + run.stderr
    assert_no_secret(world, run)


def test_a_next_link_to_another_host_is_not_followed_by_the_action(world: World) -> None:
    for n in range(120):
        world.github.add(7, f"comment {n}")
    world.github.next_origin = "https://elsewhere.example.test"
    run = world.pull_request(PLAN)
    assert run.outcome == "success", run.stderr
    assert world.github.tokens_sent_to == {"https://github.example.test"}
    [warning] = [line for line in run.stdout.splitlines() if line.startswith("::warning ")]
    assert "links its next page to https://elsewhere.example.test, not to the API" in warning
    assert "the link was not followed" in warning
    assert len(world.comments()) == 121, "a comment of its own when the list could not be read to its end"


def endless() -> Iterator[bytes]:
    """An answer that never ends (a broken proxy, a hostile server)."""
    while True:
        yield b"[" * 65536


def dribbling() -> Iterator[bytes]:
    """One byte at a time, slowly; it gives up after a minute so that a missing deadline fails, not hangs."""
    yield b"["
    ends = time.monotonic() + 60
    while time.monotonic() < ends:
        time.sleep(0.05)
        yield b" "


@pytest.mark.parametrize(
    ("method", "stream", "said"),
    [
        ("GET", endless, "GitHub sent more than 16 MiB in answer to read the comments of pull request #7"),
        ("GET", dribbling, "GitHub did not answer (headers and whole body) to read the comments of pull request #7"),
        ("POST", endless, "GitHub sent more than 1 MiB in answer to comment on pull request #7"),
        ("POST", dribbling, "GitHub did not answer (headers and whole body) to comment on pull request #7 within 1 s"),
    ],
    ids=["endless-list", "slow-list", "endless-comment", "slow-comment"],
)
def test_github_answering_without_end_or_byte_by_byte_is_a_warning_and_the_plan_still_shows(
    world: World, method: str, stream: Callable[[], Iterator[bytes]], said: str
) -> None:
    world.push(DEPLOY)
    world.write({"src/role/harvester.js": "module.exports.run = () => {\n  // harvest faster\n};\n"})
    world.github.streams[method] = stream
    world.github_timeout = 1.0

    started = time.monotonic()
    run = world.pull_request(PLAN)
    took = time.monotonic() - started

    assert run.outcome == "success", run.stderr
    assert run.outputs["exit-code"] == "2", "the plan's exit code"
    assert run.outputs["has-changes"] == "true"
    assert run.outputs["comment-url"] == ""
    assert "| `local` | `main` | update |" in run.summary
    [warning] = [line for line in run.stdout.splitlines() if line.startswith("::warning ")]
    assert f"the plan comment was not posted: {said}" in warning
    assert "Traceback" not in run.stdout + run.stderr
    assert world.comments() == []
    assert took < 50, "ended by the deadline, not by the server giving up"
    assert_no_secret(world, run)
