"""A Git ref (``gitops/edges/gittree.py``): the blobs of one commit under a root, uncommitted changes ignored, and
a link stored in the commit followed within it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitops.config.manifest import load_manifest
from gitops.core.branchbuild import UnreadableFile
from gitops.edges.gittree import GitTree
from gitops.errors import SourceError
from tests.factories import commit_all, make_repo, manifest_data, write_manifest


def test_a_commit_is_listed_and_read_as_it_was(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "bot", {"src/main.js": "v1", "src/lib/x.js": "x"})
    first = commit_all(repo, "again")
    (repo / "src" / "main.js").write_text("v2, not committed", encoding="utf-8")
    (repo / "src" / "new.js").write_text("not committed", encoding="utf-8")
    tree = GitTree.open(repo, "HEAD")
    try:
        listing = tree.listing("src")
        assert not isinstance(listing, str)
        assert listing.paths == ["lib/x.js", "main.js"]
        assert listing.read("main.js") == b"v1"
        assert listing.origin == f" in commit {first[:12]}"
        assert (
            tree.listing("dist")
            == f"does not exist in commit {first[:12]} (--ref HEAD); commit the folder, or fix root"
        )
    finally:
        tree.close()


def test_a_link_that_leaves_the_root_is_noted_and_refused_when_read(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "bot", {"src/main.js": "a", "shared/util.js": "u"}, commit=False)
    os.symlink("../shared/util.js", repo / "src" / "util.js")
    commit_all(repo, "with a link")
    tree = GitTree.open(repo, "HEAD")
    try:
        listing = tree.listing("src")
        assert not isinstance(listing, str)
        assert listing.paths == ["main.js", "util.js"]
        with pytest.raises(UnreadableFile, match=r"a symbolic link that leads outside the root"):
            listing.read("util.js")
    finally:
        tree.close()


def test_a_manifest_that_differs_from_the_commits_is_said(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "bot", {"src/main.js": "a"})
    write_manifest(repo, manifest_data())
    commit = commit_all(repo, "manifest")
    write_manifest(repo, manifest_data(branches=[{"branch": "other", "root": "src"}]))
    tree = GitTree.open(repo, "HEAD")
    try:
        warning = tree.manifest_warning(load_manifest(repo / "gitops.yaml"))
    finally:
        tree.close()
    assert warning is not None
    assert f"differs from the one in commit {commit[:12]}" in warning


def test_a_folder_outside_git_or_an_unknown_ref_is_refused(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(SourceError, match=r"^--ref main: .* is not in a Git repository"):
        GitTree.open(tmp_path / "plain", "main")
    repo = make_repo(tmp_path / "bot", {"src/main.js": "a"})
    with pytest.raises(SourceError, match=r"^--ref nowhere: "):
        GitTree.open(repo, "nowhere")
