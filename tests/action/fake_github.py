"""A fake of the GitHub REST API's issue comments, issues and deployments, answered at the httpx transport seam.

``FakeGitHub.transport`` is an ``httpx.MockTransport`` for in-process runs; ``serve_on_loopback`` puts the same
handler behind a real HTTP server on 127.0.0.1 for runs in a subprocess. Either way the fake checks the token,
paginates as GitHub does (``Link: <...>; rel="next"``) and records every request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import httpx

GITHUB_TOKEN = "ghs_fakeInstallationToken0123456789abcd"  # a test value, shaped as an installation token
BOT = {"login": "github-actions[bot]", "type": "Bot"}


@dataclass
class FakeComment:
    id: int
    issue: int
    body: str
    user: dict[str, str]


@dataclass
class FakeIssue:
    number: int
    title: str
    body: str
    state: str = "open"
    state_reason: str | None = None
    #: GitHub lists pull requests among issues (with a ``pull_request`` key).
    pull_request: bool = False
    user: dict[str, str] = field(default_factory=lambda: dict(BOT))


@dataclass
class FakeDeployment:
    id: int
    ref: str
    environment: str
    request: dict[str, Any]
    #: Each status's body as posted, oldest first.
    statuses: list[dict[str, Any]] = field(default_factory=list)

    @property
    def state(self) -> str | None:
        return self.statuses[-1]["state"] if self.statuses else None


@dataclass
class FakeGitHub:
    """Issue comments of one repository. ``read_only`` answers writes as a fork's token is answered."""

    repository: str = "alice/bot"
    token: str = GITHUB_TOKEN
    base_url: str = "https://github.example.test/api/v3"
    read_only: bool = False
    #: The repository's files by (commit, path), for the contents API (raw media type).
    files: dict[tuple[str, str], bytes] = field(default_factory=dict)
    comments: list[FakeComment] = field(default_factory=list)
    issues: list[FakeIssue] = field(default_factory=list)
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, body)
    #: Where requests went (scheme://host:port), and where one carried an Authorization header.
    origins: list[str] = field(default_factory=list)
    tokens_sent_to: set[str] = field(default_factory=set)
    #: Pagination links point to this origin instead of the API's (a hostile or misconfigured server).
    next_origin: str | None = None
    #: Per method ("GET", "POST", "PATCH"): answer 200 with this body, which is not JSON (a proxy's HTML page...).
    not_json: dict[str, bytes] = field(default_factory=dict)
    #: Per method: answer 200 (JSON) with the body this makes, sent piece by piece as it is made (endless, slow...).
    streams: dict[str, Callable[[], Iterator[bytes]]] = field(default_factory=dict)
    _next_id: int = 1000
    deployments: list[FakeDeployment] = field(default_factory=list)
    #: Deployments API failures: "create", "status" or "list" -> the status code to answer instead.
    deployment_errors: dict[str, int] = field(default_factory=dict)
    #: Serve lists of deployments and statuses in pages of this many, whatever ``per_page`` asks (pagination).
    page_size: int | None = None
    #: Called with (method, path) before each request is answered: a test runs another writer there (interleaving).
    on_request: Callable[[str, str], None] | None = None
    #: ``GET /user`` answers this login (a person's token); ``None``: 403 "Resource not accessible by integration",
    #: as it answers the Actions ``GITHUB_TOKEN``, whose comments are written by ``github-actions[bot]``.
    user_login: str | None = None

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def add(self, issue: int, body: str, user: dict[str, str] | None = None) -> FakeComment:
        comment = FakeComment(self._next_id, issue, body, user or {"login": "someone", "type": "User"})
        self._next_id += 1
        self.comments.append(comment)
        return comment

    def on(self, issue: int) -> list[FakeComment]:
        return [c for c in self.comments if c.issue == issue]

    def writes(self) -> list[tuple[str, str]]:
        """Writes to comments and issues (the deployment records have their own tests and :attr:`deployments`)."""
        return [(m, p) for m, p, _ in self.others() if m != "GET"]

    def others(self) -> list[tuple[str, str, str]]:
        """The requests that are not to the Deployments API."""
        return [r for r in self.requests if "/deployments" not in r[1]]

    def handle(self, request: httpx.Request) -> httpx.Response:
        url = urlsplit(str(request.url))
        prefix = urlsplit(self.base_url).path.rstrip("/")
        body = request.content.decode("utf-8") if request.content else ""
        self.requests.append((request.method, url.path, body))
        if self.on_request is not None:
            self.on_request(request.method, url.path)
        origin = f"{request.url.scheme}://{request.url.netloc.decode('ascii')}"
        self.origins.append(origin)
        if "authorization" in request.headers:
            self.tokens_sent_to.add(origin)
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return _json(401, {"message": "Bad credentials"})
        if request.method in self.streams:
            return httpx.Response(
                200, content=self.streams[request.method](), headers={"content-type": "application/json"}
            )
        if request.method in self.not_json:
            return httpx.Response(200, content=self.not_json[request.method], headers={"content-type": "text/html"})
        if url.path == prefix + "/user" and request.method == "GET":
            if self.user_login is None:
                return _json(403, {"message": "Resource not accessible by integration"})
            return _json(200, {"login": self.user_login, "type": "User"})
        contents = prefix + "/repos/" + self.repository + "/contents/"
        if url.path.startswith(contents) and request.method == "GET":
            ref = parse_qs(url.query).get("ref", [""])[0]
            content = self.files.get((ref, unquote(url.path[len(contents) :])))
            if content is None:
                return _json(404, {"message": "Not Found"})
            return httpx.Response(200, content=content, headers={"content-type": "application/vnd.github.raw"})
        if url.path == prefix + "/repos/" + self.repository + "/issues":
            return self._issues(request, parse_qs(url.query), body)
        if url.path.startswith(prefix + "/repos/" + self.repository + "/deployments"):
            rest = url.path[len(prefix + "/repos/" + self.repository + "/deployments") :].strip("/").split("/")
            return self._deployments(request, [r for r in rest if r], parse_qs(url.query), body)
        if not url.path.startswith(prefix + "/repos/" + self.repository + "/issues/"):
            return _json(404, {"message": "Not Found"})
        rest = url.path[len(prefix + "/repos/" + self.repository + "/issues/") :].split("/")
        if request.method == "GET" and len(rest) == 2 and rest[1] == "comments":
            return self._list(int(rest[0]), parse_qs(url.query), request)
        if request.method == "POST" and len(rest) == 2 and rest[1] == "comments":
            if self.read_only:
                return _json(403, {"message": "Resource not accessible by integration"})
            comment = self.add(int(rest[0]), json.loads(body)["body"], self._me())
            return _json(201, self._view(comment))
        if request.method == "PATCH" and len(rest) == 1 and rest[0].isdigit():
            return self._edit_issue(int(rest[0]), json.loads(body))
        if request.method in ("GET", "DELETE") and len(rest) == 2 and rest[0] == "comments" and rest[1].isdigit():
            found = [c for c in self.comments if c.id == int(rest[1])]
            if not found:
                return _json(404, {"message": "Not Found"})
            if request.method == "GET":
                return _json(200, self._view(found[0]))
            if self.read_only:
                return _json(403, {"message": "Resource not accessible by integration"})
            self.comments.remove(found[0])
            return httpx.Response(204)
        if request.method == "PATCH" and len(rest) == 2 and rest[0] == "comments":
            if self.read_only:
                return _json(403, {"message": "Resource not accessible by integration"})
            for comment in self.comments:
                if comment.id == int(rest[1]):
                    comment.body = json.loads(body)["body"]
                    return _json(200, self._view(comment))
            return _json(404, {"message": "Not Found"})
        return _json(404, {"message": "Not Found"})

    def add_deployment(self, environment: str, ref: str = "0" * 40, state: str | None = "success") -> FakeDeployment:
        deployment = FakeDeployment(self._next_id, ref, environment, {"environment": environment, "ref": ref})
        self._next_id += 1
        if state is not None:
            deployment.statuses.append({"state": state})
        self.deployments.append(deployment)
        return deployment

    def in_environment(self, environment: str) -> list[FakeDeployment]:
        return [d for d in self.deployments if d.environment == environment]

    def _deployments(
        self, request: httpx.Request, rest: list[str], query: dict[str, list[str]], body: str
    ) -> httpx.Response:
        forbidden = _json(403, {"message": "Resource not accessible by integration"})
        if not rest:
            if request.method == "POST":
                if "create" in self.deployment_errors:
                    return _json(self.deployment_errors["create"], {"message": "Server Error"})
                if self.read_only:
                    return forbidden
                data = json.loads(body)
                deployment = self.add_deployment(data["environment"], data["ref"], state=None)
                deployment.request = data
                return _json(201, {"id": deployment.id, "ref": data["ref"], "environment": data["environment"]})
            if "list" in self.deployment_errors:
                return _json(self.deployment_errors["list"], {"message": "Server Error"})
            environment = query.get("environment", [None])[0]
            found = [d for d in self.deployments if environment is None or d.environment == environment][::-1]
            return self._page(request, query, [{"id": d.id, "environment": d.environment} for d in found])
        if len(rest) != 2 or rest[1] != "statuses" or not rest[0].isdigit():
            return _json(404, {"message": "Not Found"})
        target = next((d for d in self.deployments if d.id == int(rest[0])), None)
        if target is None:
            return _json(404, {"message": "Not Found"})
        if request.method == "POST":
            if "status" in self.deployment_errors:
                return _json(self.deployment_errors["status"], {"message": "Server Error"})
            if self.read_only:
                return forbidden
            target.statuses.append(json.loads(body))
            return _json(201, {"state": target.state})
        return self._page(request, query, [{"state": s["state"]} for s in target.statuses[::-1]])

    def _page(self, request: httpx.Request, query: dict[str, list[str]], items: list[Any]) -> httpx.Response:
        per_page = self.page_size or int(query.get("per_page", ["30"])[0])
        page = int(query.get("page", ["1"])[0])
        headers: dict[str, str] = {}
        if page * per_page < len(items):
            next_url = request.url.copy_merge_params({"page": str(page + 1), "per_page": str(per_page)})
            headers["link"] = f'<{next_url}>; rel="next"'
        return _json(200, items[(page - 1) * per_page : page * per_page], headers)

    def _me(self) -> dict[str, str]:
        return dict(BOT) if self.user_login is None else {"login": self.user_login, "type": "User"}

    def add_issue(
        self,
        title: str,
        body: str,
        *,
        pull_request: bool = False,
        state: str = "open",
        user: dict[str, str] | None = None,
    ) -> FakeIssue:
        number = max([i.number for i in self.issues] + [c.issue for c in self.comments] + [0]) + 1
        issue = FakeIssue(number, title, body, state=state, pull_request=pull_request, user=user or dict(BOT))
        self.issues.append(issue)
        return issue

    def _issues(self, request: httpx.Request, query: dict[str, list[str]], body: str) -> httpx.Response:
        if request.method == "POST":
            if self.read_only:
                return _json(403, {"message": "Resource not accessible by integration"})
            data = json.loads(body)
            return _json(201, self._issue_view(self.add_issue(data["title"], data["body"], user=self._me())))
        if request.method != "GET":
            return _json(404, {"message": "Not Found"})
        state = query.get("state", ["open"])[0]
        found = [i for i in self.issues if state in ("all", i.state)]
        if query.get("direction", ["desc"])[0] == "desc":
            found = found[::-1]
        per_page = int(query.get("per_page", ["30"])[0])
        page = int(query.get("page", ["1"])[0])
        chunk = found[(page - 1) * per_page : page * per_page]
        headers: dict[str, str] = {}
        if page * per_page < len(found):
            next_url = request.url.copy_merge_params({"page": str(page + 1), "per_page": str(per_page)})
            headers["link"] = f'<{next_url}>; rel="next"'
        return _json(200, [self._issue_view(i) for i in chunk], headers)

    def _edit_issue(self, number: int, data: dict[str, Any]) -> httpx.Response:
        if self.read_only:
            return _json(403, {"message": "Resource not accessible by integration"})
        for issue in self.issues:
            if issue.number == number:
                issue.title = data.get("title", issue.title)
                issue.body = data.get("body", issue.body)
                issue.state = data.get("state", issue.state)
                issue.state_reason = data.get("state_reason", issue.state_reason)
                return _json(200, self._issue_view(issue))
        return _json(404, {"message": "Not Found"})

    def _issue_view(self, issue: FakeIssue) -> dict[str, Any]:
        kind = "pull" if issue.pull_request else "issues"
        view: dict[str, Any] = {
            "number": issue.number,
            "title": issue.title,
            "body": issue.body,
            "state": issue.state,
            "state_reason": issue.state_reason,
            "html_url": f"https://github.example.test/{self.repository}/{kind}/{issue.number}",
            "user": issue.user,
        }
        if issue.pull_request:
            view["pull_request"] = {"url": f"{self.base_url}/repos/{self.repository}/pulls/{issue.number}"}
        return view

    def _list(self, issue: int, query: dict[str, list[str]], request: httpx.Request) -> httpx.Response:
        per_page = int(query.get("per_page", ["30"])[0])
        page = int(query.get("page", ["1"])[0])
        found = self.on(issue)
        chunk = found[(page - 1) * per_page : page * per_page]
        headers: dict[str, str] = {}
        if page * per_page < len(found):
            next_url = request.url.copy_merge_params({"page": str(page + 1), "per_page": str(per_page)})
            if self.next_origin is not None:
                there = httpx.URL(self.next_origin)
                next_url = next_url.copy_with(scheme=there.scheme, host=there.host, port=there.port)
            headers["link"] = f'<{next_url}>; rel="next"'
        return _json(200, [self._view(c) for c in chunk], headers)

    def _view(self, comment: FakeComment) -> dict[str, Any]:
        html = f"https://github.example.test/{self.repository}/pull/{comment.issue}#issuecomment-{comment.id}"
        return {"id": comment.id, "body": comment.body, "user": comment.user, "html_url": html}


def _json(status: int, data: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=data, headers=headers)


@contextmanager
def serve_on_loopback(fake: FakeGitHub) -> Iterator[str]:
    """The fake behind a real HTTP server on 127.0.0.1 (for a tool running in a subprocess); yields its API URL."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            request = httpx.Request(
                self.command,
                f"http://{self.headers['host']}{self.path}",
                headers=dict(self.headers.items()),
                content=self.rfile.read(length) if length else b"",
            )
            response = fake.handle(request)
            self.send_response(response.status_code)
            for name, value in response.headers.items():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(response.content)))
            self.end_headers()
            self.wfile.write(response.content)

        do_GET = do_POST = do_PATCH = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        fake.base_url = f"http://{host!s}:{port}"
        yield fake.base_url
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
