"""The head start in front of a test's transport (``gitops.edges.service.transport``, issue 47): the branch list the
head start sends ahead goes through the transport, the one seam, made by the code that makes every request; the
client's first request claims it; whatever happens, the request is sent once and counted once.

The transport is ``httpx.MockTransport``: these are the head start's rules at the seam, without a server. The whole
run with a test transport is in ``tests/app/headstart/test_reads_ahead.py``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import httpx
import pytest

from gitops.config.credentials import TokenAuth
from gitops.core.endpoints import LIST, path_of
from gitops.core.remote import BranchInfo
from gitops.edges.clock import ManualClock
from gitops.edges.service.client import ServiceClient
from gitops.edges.service.observer import Unobserved
from gitops.edges.service.outgoing import Outgoing
from gitops.edges.service.transport import Borrowed, TransportAhead, in_front
from gitops.secrets import Secret

URL = "https://screeps.com"
TOKEN = TokenAuth(Secret("tok-0123456789abcdef0123456789abcdef"), "the environment variable T")
LISTED = {"ok": 1, "list": [{"branch": "default", "activeWorld": True, "activeSim": True}]}


class Counted(Unobserved):
    """An observer that keeps what the rules tell it: each request counted, each answer, each list."""

    def __init__(self) -> None:
        self.clock = ManualClock(1_800_000_000.0)
        super().__init__(self.clock)
        self.sent: list[str] = []
        self.answers: list[tuple[str, int]] = []
        self.lists: list[list[BranchInfo]] = []

    def record_sent(self, endpoint: str) -> None:
        super().record_sent(endpoint)
        self.sent.append(endpoint)

    def record_response(self, endpoint: str, status: int, headers: Mapping[str, str]) -> None:
        self.answers.append((endpoint, status))

    def remember_branch_list(self, branches: list[BranchInfo]) -> None:
        self.lists.append(branches)


class Seen:
    """A MockTransport handler: a list answer (or ``answer``), every request kept."""

    def __init__(self, answer: httpx.Response | Exception | None = None) -> None:
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer if self.answer is not None else httpx.Response(200, json=LISTED)


def _ahead(seen: Seen, observer: Counted) -> tuple[TransportAhead, httpx.MockTransport, Outgoing]:
    transport = httpx.MockTransport(seen)
    out = Outgoing.of(
        server_name="s",
        url=URL,
        auth=TOKEN,
        observer=observer,
        clock=observer._clock,
        max_wait=60,
        on_wait=None,
        log=None,
    )
    ahead = TransportAhead(transport, URL)
    ahead.send_ahead(out.head(path_of(LIST)), lambda: out.count(LIST))
    return ahead, transport, out


def _client(transport: httpx.BaseTransport, observer: Counted, ahead: TransportAhead) -> ServiceClient:
    return ServiceClient(server_name="s", url=URL, auth=TOKEN, observer=observer, transport=transport, early=ahead)


def test_a_list_sent_ahead_goes_through_the_transport_when_its_answer_is_read() -> None:
    seen, observer = Seen(), Counted()
    ahead, _transport, out = _ahead(seen, observer)
    assert ahead.has_request_ahead
    assert seen.requests == []  # no connection to write on early: it goes when its answer is needed
    answer = ahead.answer_ahead(time.monotonic() + 5, 1 << 20)
    assert answer is not None
    (request,) = seen.requests
    # The request is the client's: its headers are every request's (Outgoing.headers), its login's token.
    assert (request.method, str(request.url)) == ("GET", f"{URL}{path_of(LIST)}")
    assert {k.lower(): v for k, v in out.headers(path_of(LIST)).items()}.items() <= request.headers.items()
    assert request.headers["x-token"] == TOKEN.token.reveal()
    assert observer.sent == []  # counted when taken, not before
    ahead.accept_answer(answer)
    assert observer.sent == [LIST]
    ahead.settle()  # taken: never counted twice
    assert observer.sent == [LIST]
    assert not ahead.has_request_ahead


def test_the_clients_first_request_claims_the_list_sent_ahead() -> None:
    seen, observer = Seen(), Counted()
    ahead, transport, _out = _ahead(seen, observer)
    # The head start read the answer but did not take it (say, not plain enough): the client reads it itself.
    assert ahead.answer_ahead(time.monotonic() + 5, 1 << 20) is not None
    with _client(transport, observer, ahead) as client:
        branches = client.list_branches()
    assert [b.name for b in branches] == ["default"]
    assert len(seen.requests) == 1  # not sent a second time
    assert observer.sent == [LIST]  # counted by the client, once
    assert observer.answers == [(LIST, 200)]
    assert observer.lists == [branches]
    ahead.settle()
    assert observer.sent == [LIST]


def test_a_claim_before_the_list_went_out_sends_the_clients_own_request_once() -> None:
    seen, observer = Seen(), Counted()
    ahead, transport, _out = _ahead(seen, observer)
    with _client(transport, observer, ahead) as client:
        client.list_branches()
    assert len(seen.requests) == 1
    assert seen.requests[0].headers["connection"] == "close"  # the client's own (a test's transport has no socket)
    assert observer.sent == [LIST]


def test_another_first_request_leaves_the_list_sent_and_counted() -> None:
    seen, observer = Seen(), Counted()
    ahead, transport, _out = _ahead(seen, observer)
    seen.answer = httpx.Response(200, json={"ok": 1, "_id": "u1"})
    with _client(transport, observer, ahead) as client:
        client.server_version()
    # The list went out (the server would have been asked it) and is counted; then the client's own request.
    assert [f"{r.method} {r.url.path}" for r in seen.requests] == [LIST, "GET /api/version"]
    assert sorted(observer.sent) == [LIST, "GET /api/version"]  # the list's when the client's went: after it


def test_an_unclaimed_list_is_sent_and_counted_when_the_session_settles() -> None:
    seen, observer = Seen(), Counted()
    ahead, _transport, _out = _ahead(seen, observer)
    ahead.settle()
    assert len(seen.requests) == 1
    assert observer.sent == [LIST]
    ahead.settle()
    assert observer.sent == [LIST]


def test_a_list_the_transport_fails_is_dropped_for_the_clients_own_request() -> None:
    """As when an early connection fails: nothing counted, and the client's request meets the failure itself."""
    seen, observer = Seen(httpx.ConnectError("refused")), Counted()
    ahead, transport, out = _ahead(seen, observer)
    assert ahead.answer_ahead(time.monotonic() + 5, 1 << 20) is None
    assert not ahead.has_request_ahead
    same = httpx.Request("GET", f"{URL}{path_of(LIST)}", headers=out.headers(path_of(LIST)))
    with pytest.raises(httpx.ConnectError):
        in_front(transport, ahead).handle_request(same)
    assert len(seen.requests) == 2  # the client's own went through the transport
    ahead.settle()
    assert observer.sent == []  # never reached a server: nothing counted


def test_a_borrowed_transport_is_not_closed_by_its_borrower() -> None:
    closed: list[bool] = []

    class Owned(httpx.MockTransport):
        def close(self) -> None:
            closed.append(True)

    owned = Owned(lambda request: httpx.Response(204))
    with httpx.Client(transport=Borrowed(owned)) as borrower:
        assert borrower.get("http://game.test/").status_code == 204
    assert closed == []
    owned.close()
    assert closed == [True]
