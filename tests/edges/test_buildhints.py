"""``gitops/edges/buildhints.py``: the hint of a failed build, from its exit code, the tail of its output and the
real folder it ran in (package.json, lockfiles, what Git ignores)."""

from __future__ import annotations

import json
from pathlib import Path

from gitops.edges.buildhints import failure_hint, missing_file, tool_missing
from tests.factories import make_repo, write_files


def test_a_missing_program_or_package_is_recognised() -> None:
    assert tool_missing(127, [])
    assert tool_missing(1, ["sh: 1: rollup: not found"])
    assert tool_missing(1, ["Error: Cannot find module 'rollup-plugin-screeps'"])
    assert not tool_missing(1, ["SyntaxError: Unexpected token"])


def test_the_missing_file_is_shown_relative_never_as_a_temporary_path(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a": "x"})
    tail = [f"Error: ENOENT: no such file or directory, open '{repo}/config/.screeps.json'"]
    assert missing_file(tail, repo) == "config/.screeps.json"
    assert missing_file(["Cannot find module './secrets.js'"], repo) == "secrets.js"
    assert missing_file(["nothing about files"], repo) is None


def test_a_file_git_ignores_is_named_as_what_a_checkout_lacks(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": ".screeps.json\n", "a.js": "x"})
    write_files(repo, {".screeps.json": "{}"})
    hint = failure_hint(1, ['Unable to read ".screeps.json" file'], repo, repo, fresh=True)
    assert hint.startswith("The build reads .screeps.json, which Git ignores: it is in")


def test_a_file_that_is_not_there_is_named_with_the_folder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.js": "x"})
    hint = failure_hint(1, ['Unable to read "conf.json" file'], repo, repo, fresh=False)
    assert (
        hint
        == f"The build reads conf.json (in {repo}), which is not there: commit it, or make the build work without it."
    )


def test_a_program_without_a_package_json(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.js": "x"})
    hint = failure_hint(127, ["sh: 1: rollup: not found"], repo, repo, fresh=False)
    assert hint.startswith(f"Rollup is not installed where the build runs and {repo} has no package.json")


def test_a_program_the_package_json_does_not_name(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"package.json": json.dumps({"devDependencies": {"webpack": "5"}})})
    hint = failure_hint(127, ["bash: rollup: command not found"], repo, repo, fresh=False)
    assert hint.startswith("rollup is not among the dependencies of")
    assert "npm install --save-dev rollup" in hint


def test_declared_packages_not_installed_name_the_install_and_the_lockfile(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {"package.json": json.dumps({"devDependencies": {"rollup": "4"}}), "package-lock.json": "{}"},
    )
    hint = failure_hint(127, ["sh: 1: rollup: not found"], repo, repo, fresh=True)
    assert hint.startswith("The build's packages are not installed in the checkout: npm ci installs them from")
    no_lock = make_repo(tmp_path / "bare", {"package.json": json.dumps({"devDependencies": {"rollup": "4"}})})
    assert "are not installed: run npm install there" in failure_hint(
        127, ["sh: 1: rollup: not found"], no_lock, no_lock, fresh=False
    )


def test_any_other_failure_says_to_run_it_by_hand(tmp_path: Path) -> None:
    assert failure_hint(2, ["SyntaxError"], tmp_path, tmp_path, fresh=False).startswith("Fix the build (run it by hand")
