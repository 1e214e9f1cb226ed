"""``gitops/edges/gitout.py``: one bounded git question in a real repository; ``None`` when git fails."""

from __future__ import annotations

from pathlib import Path

from gitops.edges.gitout import git_output, git_text
from tests.factories import make_repo


def test_a_question_answered_is_its_output(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"src/main.js": "x"})
    commit = git_text(["rev-parse", "HEAD"], repo)
    assert commit is not None
    assert len(commit) == 40
    assert git_output(["ls-files", "-z"], repo) == b"src/main.js\0"


def test_a_failing_question_is_none(tmp_path: Path) -> None:
    assert git_output(["rev-parse", "HEAD"], tmp_path) is None  # not a repository
    assert git_text(["no-such-command"], tmp_path) is None


def test_a_missing_folder_is_none(tmp_path: Path) -> None:
    assert git_output(["status"], tmp_path / "missing") is None
