"""One request start to finish (``gitops.edges.service.exchange``) at the transport seam: what an answer becomes, and
that each request is counted once, through the one path (the operations on top are tested in ``test_client.py``)."""

from __future__ import annotations

import httpx
import pytest

from gitops.config.credentials import TokenAuth
from gitops.edges.clock import ManualClock
from gitops.edges.service.exchange import Exchange
from gitops.edges.service.observer import Unobserved
from gitops.errors import AuthError, ServiceError
from gitops.secrets import Secret

TOKEN = TokenAuth(Secret("tok-0123456789abcdef0123456789abcdef"), "the environment variable T")


def _exchange(*answers: httpx.Response) -> tuple[Exchange, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    clock = ManualClock(1_800_000_000.0)
    exchange = Exchange(
        server_name="s",
        base_url="https://screeps.com",
        auth=TOKEN,
        observer=Unobserved(clock),
        clock=clock,
        transport=httpx.MockTransport(handler),
        max_wait=60,
        on_wait=None,
        log=None,
        timeout=5,
        waiting=None,
        early=None,
    )
    return exchange, seen


def test_an_ok_answer_is_its_object_and_the_request_carries_the_login() -> None:
    exchange, seen = _exchange(httpx.Response(200, json={"ok": 1, "x": 2}))
    with exchange.http:
        assert exchange.call("GET", "/api/version") == {"ok": 1, "x": 2}
    (request,) = seen
    assert request.headers["X-Token"] == TOKEN.token.reveal()
    assert request.headers["User-Agent"].startswith("screeps-gitops/")


def test_an_answer_without_ok_is_the_servers_error() -> None:
    exchange, _seen = _exchange(httpx.Response(200, json={"ok": 0, "error": "no branch"}))
    with exchange.http, pytest.raises(ServiceError, match="no branch"):
        exchange.call("GET", "/api/version")


def test_a_429_is_waited_out_and_a_refused_token_is_not_retried() -> None:
    exchange, seen = _exchange(
        httpx.Response(429, text="retry after 10ms", headers={"X-RateLimit-Limit": "120"}),
        httpx.Response(200, json={"ok": 1}),
    )
    with exchange.http:
        assert exchange.call("GET", "/api/version") == {"ok": 1}
    assert len(seen) == 2
    exchange, seen = _exchange(httpx.Response(401, json={"error": "unauthorized"}))
    with exchange.http, pytest.raises(AuthError):
        exchange.call("GET", "/api/version")
    assert len(seen) == 1
