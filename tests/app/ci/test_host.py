"""The host interface (:mod:`gitops.app.ci.host`): each front end implements it (mypy checks the assignments below),
and a job that sets nothing asks each of them for the policy's defaults."""

from __future__ import annotations

import ast
from pathlib import Path

from gitops.app.ci.host import CiInputs, Host
from gitops.github.inputs import Inputs
from gitops.github.runner import Masks, Runner
from gitops.github.step import GitHubHost
from gitops.gitlab.host import GitLabHost, read_inputs
from tests.app.ci.recording import Recording


def test_every_front_end_is_a_host_of_the_policy(tmp_path: Path) -> None:
    lines: list[str] = []
    env = {"RUNNER_TEMP": str(tmp_path), "GITOPS_FILES_DIR": str(tmp_path)}
    hosts: dict[str, Host] = {
        "github": GitHubHost(Runner.from_env(env), Inputs.from_env(env), env, lines.append, Masks(lines.append)),
        "gitlab": GitLabHost(env, read_inputs(env), lines.append),
        "recording": Recording(CiInputs(command="plan", manifest=Path("gitops.yaml")), tmp_path),
    }
    assert {name: host.words.change for name, host in hosts.items()} == {
        "github": "pull request",
        "gitlab": "merge request",
        "recording": "change",
    }
    assert all(host.change is None for host in hosts.values())  # no event: a push
    assert hosts["github"].files == hosts["gitlab"].files == tmp_path / "screeps-gitops"


def test_a_job_that_sets_nothing_gets_the_policys_defaults_on_every_system() -> None:
    defaults = CiInputs(command="plan", manifest=Path("gitops.yaml"))
    assert Inputs.from_env({}).for_the_policy() == defaults
    assert read_inputs({}) == defaults


def _imports(package: Path) -> set[str]:
    found: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
    return found


def test_the_policy_and_the_front_ends_meet_only_at_the_host() -> None:
    gitops = Path(__file__).resolve().parents[3] / "gitops"
    fronts = ("gitops.cli", "gitops.github", "gitops.gitlab")
    assert {m for m in _imports(gitops / "app" / "ci") if m.startswith(fronts)} == set()
    assert {m for m in _imports(gitops / "gitlab") if m.startswith("gitops.github")} == set()
    assert {m for m in _imports(gitops / "github") if m.startswith("gitops.gitlab")} == set()
