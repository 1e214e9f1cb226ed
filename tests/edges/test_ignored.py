"""``gitops/edges/ignored.py``: what Git ignores under the manifest's folder, asked of a real git."""

from __future__ import annotations

from pathlib import Path

from gitops.edges.ignored import IgnoredFiles
from tests.factories import make_repo, write_files


def test_ignored_files_and_wholly_ignored_folders(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "*.log\nnode_modules/\n", "src/main.js": "x"})
    write_files(repo, {"src/debug.log": "x", "node_modules/a/index.js": "x", "src/new.js": "x"})
    ignored = IgnoredFiles.ask_git(repo)
    assert ignored.files == frozenset({"src/debug.log"})
    assert ignored.folders == frozenset({"node_modules"})
    assert ignored.covers("node_modules/a/index.js")
    assert ignored.covers("src/debug.log")
    assert not ignored.covers("src/new.js")
    assert not ignored.covers("node_modules_x/a.js")


def test_outside_a_repository_nothing_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("x", encoding="utf-8")
    assert IgnoredFiles.ask_git(tmp_path) == IgnoredFiles()
    assert not IgnoredFiles().covers("a.log")
