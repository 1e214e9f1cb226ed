"""The merge request's note through GitLab's API (faked at the httpx transport seam) and the run's Markdown."""

from __future__ import annotations

import pytest

from gitops.app.ci.report import Report
from gitops.errors import UsageError
from gitops.gitlab.notes import GitLabNotes, NoteError, marker, note_markdown
from gitops.secrets import Secret
from tests.gitlab.fake_gitlab import API, BOT, GITLAB_TOKEN, PER_PAGE, FakeGitLab


def _notes(gitlab: FakeGitLab) -> GitLabNotes:
    return GitLabNotes(API, gitlab.project, gitlab.iid, Secret(GITLAB_TOKEN), gitlab.transport())


def test_our_note_is_found_on_a_later_page_and_edited() -> None:
    gitlab = FakeGitLab()
    for n in range(PER_PAGE):
        gitlab.add(f"review {n}", author="bob")
    ours = gitlab.add(marker("gitops.yaml") + "\nold plan", author=BOT)
    with _notes(gitlab) as notes:
        assert notes.upsert(marker("gitops.yaml"), marker("gitops.yaml") + "\nnew plan") == (ours, "updated")
    assert gitlab.notes[-1]["body"].endswith("new plan")
    assert len(gitlab.notes) == PER_PAGE + 1


def test_a_strangers_note_with_our_marker_is_not_taken_for_ours() -> None:
    gitlab = FakeGitLab()
    gitlab.add(marker("gitops.yaml") + "\nforged", author="mallory")
    with _notes(gitlab) as notes:
        _, what = notes.upsert(marker("gitops.yaml"), marker("gitops.yaml") + "\nplan")
    assert what == "created"
    assert gitlab.notes[0]["body"].endswith("forged")


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (403, b'{"message": "403 Forbidden"}', "GitLab refused to read the token's user: 403 Forbidden"),
        (200, b"<html>sign in</html>", "with something not JSON"),
    ],
)
def test_a_refusal_or_an_answer_not_json_is_a_note_error(status: int, body: bytes, says: str) -> None:
    gitlab = FakeGitLab(answer=(status, body))
    with _notes(gitlab) as notes, pytest.raises(NoteError, match=says):
        notes.upsert(marker("gitops.yaml"), "plan")
    assert gitlab.notes == []


def test_the_marker_cannot_be_closed_early_by_the_manifests_name() -> None:
    assert marker("a-->b.yaml") == "<!-- screeps-gitops note: a- -b.yaml -->"
    assert marker("x--y>.yaml").count("-->") == 1


def test_the_notes_markdown_redacts_secrets_and_fences_the_error() -> None:
    secret = Secret("note-canary-4c1d9e0f2a7b")
    report = Report(command="plan", manifest="gitops.yaml", error=UsageError(f"bad value {secret.reveal()}"))
    report.exit_code = 4
    report.notices.append("Planned from the ledger.")
    text = note_markdown(report, footer="screeps-gitops for commit abc1234")
    assert secret.reveal() not in text
    assert "> [!note]\n> Planned from the ledger." in text
    assert "**Failed** (exit code 4):" in text
    assert "```text" in text
    assert text.rstrip().endswith("<sub>screeps-gitops for commit abc1234</sub>")
