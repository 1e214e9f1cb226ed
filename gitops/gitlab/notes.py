"""The merge request's one note through GitLab's REST API (``CI_API_V4_URL``), and the run's Markdown for it. Ours is
the note the token's own user (``GET /user``) wrote that starts with the marker; the token goes to the API only (no
redirects), each answer within a cap and a deadline; any failure is a :class:`NoteError`, a warning for the host.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from gitops.app.ci.report import Report
from gitops.edges.http import AnswerTooLarge, UnreadableJSON, parse_json, send_bounded
from gitops.errors import GitopsError
from gitops.render.drift import render_markdown as render_drift
from gitops.render.outcome import markdown_sections
from gitops.render.plan import md_code, md_fence, render_markdown
from gitops.secrets import Secret, redact

#: GitLab's longest note (characters); the most bytes of one answer, seconds of one request, pages of notes read.
NOTE_LIMIT, ANSWER_CAP, TIMEOUT, MAX_PAGES = 1_000_000, 16 * 1024 * 1024, 30.0, 30


class NoteError(GitopsError):
    """GitLab could not be asked, or refused: the note was not written (a warning, never the run's failure)."""


def marker(manifest: str) -> str:
    """The note's hidden first line: one note per manifest."""
    return f"<!-- screeps-gitops note: {manifest.replace('--', '- -').replace('>', '')} -->"


def note_markdown(report: Report, *, footer: str, limit: int = NOTE_LIMIT - 4096) -> str:
    """The run's Markdown: notices, the plan (or the drift report), apply and verify outcomes, the error; redacted
    (a note is not masked as a job's log is)."""
    title = f"screeps-gitops {report.command}"
    head = "".join(f"> [!note]\n> {line}\n\n" for line in report.notices)
    tail = markdown_sections(report.outcomes, report.verifications, report.health())
    if report.error is not None:
        tail += ["", f"**Failed** (exit code {report.exit_code}):", "", md_fence(redact(str(report.error)), "text")]
    rest = "\n".join([*tail, "", f"<sub>{footer}</sub>", ""])
    if report.drift is not None:
        body = render_drift(report.drift, title=title)
    elif report.plan is not None:
        room = max(limit - len(head) - len(rest), 1000)
        body = render_markdown(report.plan, now=report.plan.created_at, max_chars=room, title=title)
    else:
        body = f"### {title} ({md_code(report.manifest)})\n"
    return redact(head + body + rest)


class GitLabNotes:
    """The notes of one merge request, written with a token that may (``api`` scope, Reporter role)."""

    def __init__(self, api_url: str, project: str, iid: int, token: Secret, transport: Any = None) -> None:
        self._http = httpx.Client(base_url=api_url.rstrip("/") + "/", transport=transport, follow_redirects=False)
        self._token, self._base = token, f"projects/{project}/merge_requests/{iid}/notes"

    def __enter__(self) -> GitLabNotes:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def upsert(self, mark: str, body: str) -> tuple[int, str]:
        """Edit our note that starts with ``mark``, or create one; its id and what was done."""
        me = self._call("GET", "user", "read the token's user")
        name = me.get("username") if isinstance(me, dict) else None
        ours = None
        for page in range(1, MAX_PAGES + 1):
            notes = self._call("GET", self._base, "read the merge request's notes", params={"page": page})
            if not isinstance(notes, list):
                raise NoteError("GitLab answered the merge request's notes with something not a list")
            ours = next((n for n in notes if _ours(n, name, mark)), None)
            if ours is not None or len(notes) < 20:  # GitLab's default page holds 20
                break
        if ours is None:
            created = self._call("POST", self._base, "create the plan note", json={"body": body})
            return int(created["id"]), "created"
        self._call("PUT", f"{self._base}/{ours['id']}", "update the plan note", json={"body": body})
        return int(ours["id"]), "updated"

    def _call(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        request = self._http.build_request(method, path, headers={"PRIVATE-TOKEN": self._token.reveal()}, **kwargs)
        try:
            response = send_bounded(self._http, request, cap=ANSWER_CAP, deadline=time.monotonic() + TIMEOUT)
        except (AnswerTooLarge, httpx.HTTPError) as exc:
            raise NoteError(f"could not {what} at {self._http.base_url}: {type(exc).__name__}") from None
        if not response.is_success:
            raise NoteError(f"GitLab refused to {what}: {response.status_code} {response.reason_phrase}")
        try:
            return parse_json(response.content)
        except UnreadableJSON:
            raise NoteError(f"GitLab answered {response.status_code} to {what} with something not JSON") from None


def _ours(note: Any, name: Any, mark: str) -> bool:
    author = note.get("author") if isinstance(note, dict) else None
    body = note.get("body") if isinstance(note, dict) else None
    mine = isinstance(author, dict) and isinstance(name, str) and author.get("username") == name
    return mine and isinstance(body, str) and body.startswith(mark) and isinstance(note.get("id"), int)
