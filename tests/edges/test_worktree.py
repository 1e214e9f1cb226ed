"""The working tree (``gitops/edges/worktree.py``): the files under a root, only those of the repository holding the
manifest, and the same boundary as ``gitops pull`` sees it from the writing side."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitops.edges.worktree import WorkTree, outside_reason, read_whole, worktree_files
from gitops.errors import SourceError
from tests.factories import make_repo


def test_the_files_under_a_root_leave_out_what_git_ignores_and_never_module_folders(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "bot",
        {".gitignore": "*.log\n", "src/main.js": "a", "src/lib/x.js": "b", "src/debug.log": "c"},
    )
    (repo / "src" / "node_modules").mkdir()
    (repo / "src" / "node_modules" / "dep.js").write_text("d", encoding="utf-8")
    assert sorted(worktree_files(repo, "src") or []) == ["lib/x.js", "main.js"]
    assert worktree_files(repo, "dist") is None  # not there yet: pull may create it
    listing = WorkTree(repo).listing("src")
    assert not isinstance(listing, str)
    assert listing.read("main.js") == b"a"


def test_a_root_outside_the_repository_or_in_git_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "bot", {"src/main.js": "a"})
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(SourceError, match=r"^root \.\./elsewhere resolves to .*outside the repository"):
        worktree_files(repo, "../elsewhere")
    assert (
        WorkTree(repo).listing(".git/hooks") == "is inside .git, Git's own folder (history, hooks and config, "
        "never code to deploy); name a folder of the working tree"
    )
    assert outside_reason(repo, os.path.realpath(tmp_path / "elsewhere")) == "leads outside the repository"
    assert outside_reason(repo, os.path.realpath(repo / ".git" / "config")) == "leads into .git, Git's own folder"
    assert outside_reason(repo, os.path.realpath(repo / "src" / "main.js")) is None


def test_a_file_is_read_whole_and_its_modification_time_told(tmp_path: Path) -> None:
    path = tmp_path / "main.js"
    path.write_bytes(b"x" * 70_000)
    told: list[int] = []
    assert read_whole(str(path), told.append) == b"x" * 70_000
    assert told == [path.stat().st_mtime_ns]
