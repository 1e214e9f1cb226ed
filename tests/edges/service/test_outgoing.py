"""A request before the wire (``gitops.edges.service.outgoing``): the one place for its headers, login, pacing, count
and an answer's effects, which the client and the head start both use (issue 47)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

import httpx
import pytest

from gitops.config.credentials import PasswordAuth, TokenAuth
from gitops.core.endpoints import GLOBAL_LIMIT, LIST, SIGNIN, path_of
from gitops.core.remote import BranchInfo
from gitops.edges.clock import ManualClock
from gitops.edges.early import same_request
from gitops.edges.headers import CLIENT_HEADERS
from gitops.edges.service.auth import PasswordLogin
from gitops.edges.service.observer import Unobserved
from gitops.edges.service.outgoing import Outgoing
from gitops.secrets import Secret

TOKEN = TokenAuth(Secret("tok-0123456789abcdef0123456789abcdef"), "the environment variable T")
START = 1_800_000_000.0


class Told(Unobserved):
    """An observer that keeps what it is told."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.sent: list[str] = []
        self.answers: list[tuple[str, int, dict[str, str]]] = []
        self.lists: list[list[BranchInfo]] = []

    def record_sent(self, endpoint: str) -> None:
        super().record_sent(endpoint)
        self.sent.append(endpoint)

    def record_response(self, endpoint: str, status: int, headers: Mapping[str, str]) -> None:
        self.answers.append((endpoint, status, dict(headers)))

    def remember_branch_list(self, branches: list[BranchInfo]) -> None:
        self.lists.append(branches)


def _outgoing(auth: TokenAuth | PasswordAuth | None = TOKEN, url: str = "https://screeps.com/season") -> Outgoing:
    clock = ManualClock(START)
    return Outgoing.of(
        server_name="s", url=url, auth=auth, observer=Told(clock), clock=clock, max_wait=60, on_wait=None, log=None
    )


def test_every_request_carries_the_tools_headers_and_the_logins() -> None:
    headers = _outgoing().headers(path_of(LIST))
    assert CLIENT_HEADERS.items() <= headers.items()
    assert headers["X-Token"] == TOKEN.token.reveal()
    assert headers["Accept-Encoding"] == "gzip, deflate"
    assert "X-Token" not in _outgoing(auth=None).headers(path_of(LIST))


def test_the_sign_in_carries_no_login_and_a_login_without_a_client_cannot_sign_in() -> None:
    out = _outgoing(PasswordAuth("alice", Secret("pw"), "http://x", "env"), url="http://127.0.0.1:21025")
    assert isinstance(out.login, PasswordLogin)
    assert "X-Token" not in out.headers(path_of(SIGNIN))
    with pytest.raises(RuntimeError, match="not ahead of one"):  # a sign-in is a request of its own, a client's
        out.headers(path_of(LIST))


def test_the_head_is_the_request_httpx_writes() -> None:
    """The bytes the head start writes on the early connection ask exactly what the client's request asks."""
    out = _outgoing()
    request = httpx.Request("GET", "https://screeps.com/season/api/user/branches", headers=out.headers(path_of(LIST)))
    written = [b"GET /season/api/user/branches HTTP/1.1", *(k + b": " + v for k, v in request.headers.raw)]
    assert same_request(out.head(path_of(LIST)), b"\r\n".join(written) + b"\r\n\r\n")
    assert out.head(path_of(LIST)).startswith(b"GET /season/api/user/branches HTTP/1.1\r\nHost: screeps.com\r\n")


def test_a_request_is_counted_and_paced_under_the_global_limit() -> None:
    out = _outgoing()
    told = out.observer
    assert isinstance(told, Told)
    for _ in range(GLOBAL_LIMIT.count):
        out.pace_and_count(LIST)
    clock = told._clock
    assert isinstance(clock, ManualClock)
    before = clock.now()
    out.pace_and_count(LIST)  # the 121st within the minute waits for the window
    assert clock.now() > before
    assert len(told.sent) == GLOBAL_LIMIT.count + 1


def test_an_answer_teaches_the_ledger_and_a_list_is_remembered_only_when_it_is_one() -> None:
    out = _outgoing()
    told = out.observer
    assert isinstance(told, Told)
    out.answered(LIST, httpx.Response(200, headers={"X-RateLimit-Remaining": "5"}))
    assert told.answers[-1][:2] == (LIST, 200)
    assert told.answers[-1][2]["x-ratelimit-remaining"] == "5"
    out.answered(LIST, httpx.Response(429, text="rate limit"))  # without headers: its window recorded as spent
    assert told.answers[-1][2]["X-RateLimit-Remaining"] == "0"
    assert out.listed({"ok": 0, "list": []}) is None
    assert out.listed({"ok": 1, "list": "nope"}) is None
    assert told.lists == []
    listed = out.listed({"ok": 1, "list": [{"branch": "default", "activeWorld": True, "activeSim": False}]})
    assert listed is not None
    assert told.lists == [listed]


def test_it_imports_no_http_client() -> None:
    """The head start makes its request with it before httpx is imported."""
    code = (
        "import sys, gitops.edges.service.outgoing\n"
        "print(sorted(m for m in sys.modules if m.startswith(('httpx', 'httpcore', 'h11'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
