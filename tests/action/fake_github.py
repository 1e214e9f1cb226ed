"""A fake of the GitHub REST API's issue comments, answered at the httpx transport seam.

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
from urllib.parse import parse_qs, urlsplit

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
class FakeGitHub:
    """Issue comments of one repository. ``read_only`` answers writes as a fork's token is answered."""

    repository: str = "alice/bot"
    token: str = GITHUB_TOKEN
    base_url: str = "https://github.example.test/api/v3"
    read_only: bool = False
    comments: list[FakeComment] = field(default_factory=list)
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
        return [(m, p) for m, p, _ in self.requests if m != "GET"]

    def handle(self, request: httpx.Request) -> httpx.Response:
        url = urlsplit(str(request.url))
        prefix = urlsplit(self.base_url).path.rstrip("/")
        body = request.content.decode("utf-8") if request.content else ""
        self.requests.append((request.method, url.path, body))
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
        if not url.path.startswith(prefix + "/repos/" + self.repository + "/issues/"):
            return _json(404, {"message": "Not Found"})
        rest = url.path[len(prefix + "/repos/" + self.repository + "/issues/") :].split("/")
        if request.method == "GET" and len(rest) == 2 and rest[1] == "comments":
            return self._list(int(rest[0]), parse_qs(url.query), request)
        if request.method == "POST" and len(rest) == 2 and rest[1] == "comments":
            if self.read_only:
                return _json(403, {"message": "Resource not accessible by integration"})
            comment = self.add(int(rest[0]), json.loads(body)["body"], BOT)
            return _json(201, self._view(comment))
        if request.method == "PATCH" and len(rest) == 2 and rest[0] == "comments":
            if self.read_only:
                return _json(403, {"message": "Resource not accessible by integration"})
            for comment in self.comments:
                if comment.id == int(rest[1]):
                    comment.body = json.loads(body)["body"]
                    return _json(200, self._view(comment))
            return _json(404, {"message": "Not Found"})
        return _json(404, {"message": "Not Found"})

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

        do_GET = do_POST = do_PATCH = _answer

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
