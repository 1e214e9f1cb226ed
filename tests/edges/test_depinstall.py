"""``gitops/edges/depinstall.py``: whether a build needs ``npm ci`` (or its kin) first, decided from the real folder."""

from __future__ import annotations

import json
from pathlib import Path

from gitops.edges.depinstall import Install, needed
from tests.factories import make_repo

PACKAGE = json.dumps({"devDependencies": {"rollup": "4"}, "scripts": {"build": "rollup -c"}})


def test_a_node_build_without_node_modules_installs_from_its_lockfile(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"package.json": PACKAGE, "package-lock.json": "{}"})
    assert needed(repo, "auto", ["npm run build"]) == Install(
        ["npm", "ci", "--no-audit", "--no-fund"], repo, "package-lock.json"
    )


def test_the_lockfile_of_a_folder_above_within_the_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"yarn.lock": "", "bots/a/package.json": PACKAGE})
    found = needed(repo / "bots" / "a", "auto", ["npx rollup -c"])
    assert found is not None
    assert (found.folder, found.lockfile) == (repo, "yarn.lock")


def test_no_install_when_installed_never_or_not_node(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"package.json": PACKAGE, "package-lock.json": "{}"})
    assert needed(repo, "never", ["npm run build"]) is None
    assert needed(repo, "auto", ["cargo build"]) is None  # runs no Node.js tooling
    assert needed(repo, "auto", ["npm ci && npm run build"]) is None  # installs itself
    (repo / "node_modules").mkdir()
    assert needed(repo, "auto", ["npm run build"]) is None


def test_no_package_json_or_one_without_dependencies(tmp_path: Path) -> None:
    assert needed(tmp_path, "auto", ["npm run build"]) is None
    (tmp_path / "package.json").write_text('{"name": "x"}', encoding="utf-8")
    assert needed(tmp_path, "auto", ["npm run build"]) is None
    (tmp_path / "package.json").write_text("{not json", encoding="utf-8")
    assert needed(tmp_path, "auto", ["npm run build"]) is None


def test_an_install_command_of_the_manifest_is_run_as_written(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"package.json": PACKAGE})
    assert needed(repo, "pnpm install", ["npm run build"]) == Install("pnpm install", repo, None)
