"""GitLab CI's front end end to end: the policy of :mod:`gitops.app.ci` on GitLab's predefined variables, against the
real stand-in over loopback, with GitLab's notes API faked at the httpx transport seam (tests/gitlab/fake_gitlab.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gitops.errors import ExitCode, GitopsError, TrustError, UsageError
from gitops.gitlab.host import GitLabHost, read_inputs, run_gitlab
from gitops.gitlab.notes import marker
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.factories import commit_all, make_repo
from tests.gitlab.fake_gitlab import API, GITLAB_TOKEN, FakeGitLab

UPLOAD = "POST /api/user/code"


def _repo(tmp_path: Path, url: str) -> tuple[Path, str]:
    manifest = {
        "version": 1,
        "servers": {"local": {"url": url, "token_env": "SCREEPS_TOKEN"}},
        "branches": [{"server": "local", "branch": "main", "root": "src"}],
    }
    root = make_repo(
        tmp_path / "bot",
        {"src/main.js": "module.exports.loop = () => {};\n", "gitops.yaml": yaml.safe_dump(manifest)},
    )
    return root, commit_all(root)


def _env(tmp_path: Path, sha: str, *, merge_request: bool, **extra: str) -> dict[str, str]:
    env = {
        "HOME": str(tmp_path),
        "CI_PROJECT_ID": "7",
        "CI_API_V4_URL": API,
        "CI_COMMIT_SHA": sha,
        "CI_JOB_URL": "https://gitlab.example.test/alice/bot/-/jobs/1",
        "CI_PIPELINE_SOURCE": "merge_request_event" if merge_request else "push",
        "GITOPS_STATE_DIR": str(tmp_path / "state"),
        "GITOPS_FILES_DIR": str(tmp_path / "files"),
        "GITOPS_OUTPUT_FILE": str(tmp_path / "gitops.env"),
        "GITOPS_SUMMARY_FILE": str(tmp_path / "summary.md"),
        "GITOPS_GITLAB_TOKEN": GITLAB_TOKEN,
    }
    if merge_request:
        env |= {
            "CI_MERGE_REQUEST_IID": "4",
            "CI_MERGE_REQUEST_PROJECT_ID": "7",
            "CI_MERGE_REQUEST_SOURCE_PROJECT_ID": "7",
            "CI_MERGE_REQUEST_PROJECT_URL": "https://gitlab.example.test/alice/bot",
        }
    return env | extra


def _outputs(tmp_path: Path) -> dict[str, str]:
    lines = (tmp_path / "gitops.env").read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines)


def _checkout(tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> str:
    """The repository, committed and made the job's folder; its commit."""
    root, sha = _repo(tmp_path, standin.url)
    monkeypatch.chdir(root)
    return sha


def _run(env: dict[str, str], standin: StandIn, gitlab: FakeGitLab, lines: list[str]) -> int:
    return run_gitlab(env, echo=lines.append, gitlab=gitlab.transport(), clock=standin.clock)


def test_a_merge_requests_plan_is_one_note_edited_in_place_and_never_a_strangers(
    tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = _checkout(tmp_path, standin, monkeypatch)
    gitlab = FakeGitLab()
    gitlab.add(marker("gitops.yaml") + "\nforged plan", author="mallory")
    lines: list[str] = []
    # The token is a protected variable: a merge request's pipeline does not get it.
    assert _run(_env(tmp_path, sha, merge_request=True), standin, gitlab, lines) == 0
    assert standin.count("GET /api/user/branches") == 0  # refresh never: planned from the ledger
    ours = [n for n in gitlab.notes if n["author"]["username"] != "mallory"]
    assert len(ours) == 1
    assert ours[0]["body"].startswith(marker("gitops.yaml"))
    # The policy's words, with GitLab's noun:
    assert "A merge request's plan runs without the deploy token for server 'local'" in ours[0]["body"]
    assert gitlab.notes[0]["body"].endswith("forged plan")  # the stranger's note is left alone
    outputs = _outputs(tmp_path)
    assert outputs["GITOPS_EXIT_CODE"] == "2"
    assert outputs["GITOPS_HAS_CHANGES"] == "true"
    assert outputs["GITOPS_COMMENT_URL"].endswith(f"/-/merge_requests/4#note_{ours[0]['id']}")
    assert Path(outputs["GITOPS_PLAN_FILE"]).is_file()
    assert _run(_env(tmp_path, sha, merge_request=True), standin, gitlab, lines) == 0
    assert len(gitlab.notes) == 2
    assert [m for m, _, _ in gitlab.requests].count("PUT") == 1
    assert {token for _, _, token in gitlab.requests} == {GITLAB_TOKEN}  # in its header, to the API only
    assert "Plan note updated on merge request !4" in lines[-1]


def test_a_merge_request_given_the_token_that_moves_the_server_is_refused_before_any_request(
    tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, base = _repo(tmp_path, standin.url)
    manifest = root / "gitops.yaml"
    manifest.write_text(manifest.read_text("utf-8").replace(standin.url, "http://127.0.0.1:9"), "utf-8")
    head = commit_all(root, "move the server")
    monkeypatch.chdir(root)
    gitlab = FakeGitLab()
    env = _env(tmp_path, head, merge_request=True, CI_MERGE_REQUEST_DIFF_BASE_SHA=base, SCREEPS_TOKEN=FULL_TOKEN)
    with pytest.raises(TrustError, match="this merge request changes where credentials go"):
        _run(env, standin, gitlab, [])
    assert standin.count("GET /api/user/branches", ALICE) == 0
    assert _outputs(tmp_path)["GITOPS_EXIT_CODE"] == str(int(ExitCode.TRUST))
    assert "changes where credentials go" in gitlab.notes[0]["body"]
    assert FULL_TOKEN not in gitlab.notes[0]["body"]


def test_a_merge_request_whose_base_is_not_fetched_is_refused_with_gitlabs_fix(
    tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = _checkout(tmp_path, standin, monkeypatch)
    env = _env(tmp_path, sha, merge_request=True, CI_MERGE_REQUEST_DIFF_BASE_SHA="f" * 40, SCREEPS_TOKEN=FULL_TOKEN)
    with pytest.raises(TrustError) as refused:
        _run(env, standin, FakeGitLab(), [])
    assert "is not in the checkout (set `GIT_DEPTH: 0`)" in refused.value.message
    assert refused.value.hint is not None
    assert "make its variable protected" in refused.value.hint


def test_a_push_applies_with_the_token_and_writes_no_note(
    tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = _checkout(tmp_path, standin, monkeypatch)
    gitlab = FakeGitLab()
    lines: list[str] = []
    env = _env(tmp_path, sha, merge_request=False, GITOPS_COMMAND="apply", SCREEPS_TOKEN=FULL_TOKEN)
    assert _run(env, standin, gitlab, lines) == 0, lines
    assert standin.count("POST /api/user/clone-branch", ALICE) == 1, "\n".join(lines)
    assert standin.branch_modules(ALICE, "main") == {"main": "module.exports.loop = () => {};\n"}
    assert gitlab.requests == []
    assert _outputs(tmp_path)["GITOPS_EXIT_CODE"] == "0"
    assert any(line.startswith("Applied: 1 branch(es) changed") for line in lines)
    assert "clone-branch" in (tmp_path / "summary.md").read_text("utf-8")


def test_a_push_without_the_token_says_where_gitlab_keeps_variables(
    tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = _checkout(tmp_path, standin, monkeypatch)
    lines: list[str] = []
    with pytest.raises(GitopsError) as stopped:
        _run(_env(tmp_path, sha, merge_request=False, GITOPS_COMMAND="apply"), standin, FakeGitLab(), lines)
    assert stopped.value.exit_code == ExitCode.CREDENTIALS
    assert any(line.startswith("warning: ") and "Settings → CI/CD → Variables" in line for line in lines)
    assert standin.count(UPLOAD, ALICE) == 0


def test_a_fork_and_a_push_are_told_apart_by_gitlabs_variables(tmp_path: Path) -> None:
    env = _env(tmp_path, "a" * 40, merge_request=True, CI_MERGE_REQUEST_DIFF_BASE_SHA="b" * 40)
    inputs = read_inputs(env)
    own = GitLabHost(env, inputs, print).change
    assert own is not None
    assert (own.number, own.base_sha, own.from_fork) == (4, "b" * 40, False)
    fork = GitLabHost(env | {"CI_MERGE_REQUEST_SOURCE_PROJECT_ID": "99"}, inputs, print).change
    assert fork is not None
    assert fork.from_fork
    assert GitLabHost(_env(tmp_path, "a" * 40, merge_request=False), inputs, print).change is None


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [("COMMAND", "deploy", "GITOPS_COMMAND"), ("REFRESH", "sometimes", "GITOPS_REFRESH"), ("MAX_WAIT", "soon", "")],
)
def test_a_bad_variable_is_a_usage_error_naming_it(name: str, value: str, named: str) -> None:
    with pytest.raises(UsageError, match=f"variable GITOPS_{name} is {value!r}") as refused:
        read_inputs({f"GITOPS_{name}": value})
    assert refused.value.exit_code == ExitCode.USAGE
    assert named in refused.value.message
