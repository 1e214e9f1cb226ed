"""GitLab's merge request notes API, faked at the httpx transport seam (the one place the suite fakes a service it
cannot run): notes kept in memory, each request recorded with the header that carried its token."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

API = "https://gitlab.example.test/api/v4"
GITLAB_TOKEN = "glpat-notes-token-0123456789"
BOT = "project_7_bot"
PER_PAGE = 20


@dataclass
class FakeGitLab:
    """The notes of merge request ``!iid`` of project ``project``; ``user`` is who the token writes as."""

    project: str = "7"
    iid: int = 4
    user: str = BOT
    notes: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    #: An answer to give to every request instead (status, body), to show failures.
    answer: tuple[int, bytes] | None = None

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self._handle)

    def add(self, body: str, author: str) -> int:
        note_id = 100 + len(self.notes)
        self.notes.append({"id": note_id, "body": body, "author": {"username": author}, "system": False})
        return note_id

    def _handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.requests.append((request.method, path, request.headers.get("PRIVATE-TOKEN")))
        if self.answer is not None:
            return httpx.Response(self.answer[0], content=self.answer[1])
        if request.headers.get("PRIVATE-TOKEN") != GITLAB_TOKEN:
            return httpx.Response(401, json={"message": "401 Unauthorized"})
        base = f"/api/v4/projects/{self.project}/merge_requests/{self.iid}/notes"
        if path == "/api/v4/user":
            return httpx.Response(200, json={"username": self.user})
        if path == base and request.method == "GET":
            page = int(request.url.params.get("page", "1"))
            return httpx.Response(200, json=self.notes[(page - 1) * PER_PAGE : page * PER_PAGE])
        if path == base and request.method == "POST":
            note_id = self.add(json.loads(request.content)["body"], self.user)
            return httpx.Response(201, json=self.notes[-1] | {"id": note_id})
        if path.startswith(base + "/") and request.method == "PUT":
            note = next(n for n in self.notes if n["id"] == int(path.rsplit("/", 1)[1]))
            note["body"] = json.loads(request.content)["body"]
            return httpx.Response(200, json=note)
        return httpx.Response(404, json={"message": "404 Not found"})
