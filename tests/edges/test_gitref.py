"""``gitops/edges/gitref.py``: a ``--ref`` resolved by git itself in a real repository, each refusal worded."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.edges.gitref import NOT_FOUND_HINT, resolve_commit
from gitops.errors import SourceError
from tests.factories import commit_all, git, make_repo, write_files


def test_a_branch_a_tag_and_an_ancestor_resolve_to_their_commits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.js": "1"})
    first = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "tag", "v1")
    write_files(repo, {"a.js": "2"})
    second = commit_all(repo)
    assert resolve_commit(repo, "main") == second
    assert resolve_commit(repo, "v1") == first
    assert resolve_commit(repo, "HEAD~1") == first


@pytest.mark.parametrize(
    ("ref", "words"),
    [
        ("", "--ref is empty"),
        ("HEAD:src", "names a tree (a folder)"),
        ("HEAD:a.js", "names a blob (a file)"),
        ("nope", "--ref nope: no such commit, branch or tag in"),
        ("--output=/tmp/x", "no such commit, branch or tag"),  # never read as an option
    ],
)
def test_what_is_not_a_commit_is_refused_in_words(tmp_path: Path, ref: str, words: str) -> None:
    repo = make_repo(tmp_path / "repo", {"a.js": "1", "src/b.js": "2"})
    with pytest.raises(SourceError) as refused:
        resolve_commit(repo, ref)
    assert words in str(refused.value)


def test_a_repository_without_a_commit_says_so(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.js": "1"}, commit=False)
    with pytest.raises(SourceError, match="the repository has no commit yet") as refused:
        resolve_commit(repo, "main")
    assert refused.value.hint == NOT_FOUND_HINT


def test_a_shallow_clone_names_the_cause(tmp_path: Path) -> None:
    origin = make_repo(tmp_path / "origin", {"a.js": "1"})
    write_files(origin, {"a.js": "2"})
    commit_all(origin)
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", "shallow")
    with pytest.raises(SourceError, match=r"a shallow clone: older commits are not fetched"):
        resolve_commit(tmp_path / "shallow", "HEAD~1")
