"""The HTTP client's side of the early connection (``gitops.edges.earlypool``): an httpx transport given an early
connection (:func:`use_early`) takes its socket for its first connection to that address; a request that is the one
sent ahead is answered by what the server sent back to it, and not written again; any other goes out on a new
connection, the one sent ahead counted as unclaimed; a failed early connect fails as httpcore's own connect.

A bare ``httpx.Client`` over a real ``httpx.HTTPTransport``, the real stand-in on loopback, real sockets: the
service client on top of it is ``tests/edges/test_early.py``'s; the TLS path (``EarlyStream.start_tls``: the handshake
done early is the pool's, or another context gets a new connection) is ``tests/edges/test_tls.py``'s, which has the
certificate authority and the stand-in over TLS."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpcore
import httpx
import pytest

from gitops.edges.early import EarlyConnection, address_of
from gitops.edges.earlypool import EarlyBackend, connect_errors, use_early
from gitops.standin.testing import FULL_TOKEN, StandIn
from tests.edges.test_early import _early_to_listener

LIST_PATH = "/api/user/branches"
LIST = f"GET {LIST_PATH}"
VERSION = "GET /api/version"


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _head(request: httpx.Request) -> bytes:
    """The request's head as the pool writes it (a request without a body): what is sent ahead for it."""
    lines = [f"{request.method} {request.url.raw_path.decode('ascii')} HTTP/1.1".encode()]
    lines += [name + b": " + value for name, value in request.headers.raw]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _closed_address() -> tuple[str, int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        host, port = probe.getsockname()
        return host, port


@contextmanager
def _client(early: EarlyConnection, told: list[socket.socket]) -> Iterator[httpx.Client]:
    transport = httpx.HTTPTransport()
    use_early(transport, early, told.append)
    with httpx.Client(transport=transport, timeout=10) as client:
        yield client


def _local_end(response: httpx.Response) -> tuple[str, int]:
    stream = response.extensions["network_stream"]
    name: tuple[str, int] = stream.get_extra_info("socket").getsockname()
    return name


def _early_end(early: EarlyConnection) -> tuple[str, int]:
    _wait_for(early._done.is_set, "the early connect did not finish")
    assert early._socket is not None, early._error
    name: tuple[str, int] = early._socket.getsockname()
    return name


def _list_sent_ahead(standin: StandIn, client: httpx.Client, early: EarlyConnection, unclaimed: list[str]) -> None:
    request = client.build_request("GET", standin.url + LIST_PATH, headers={"X-Token": FULL_TOKEN})
    early.send_ahead(_head(request), lambda: unclaimed.append("list"))
    _wait_for(lambda: standin.count(LIST) == 1, "the branch list was not sent ahead")


def test_the_pools_first_connection_is_the_early_socket(standin: StandIn) -> None:
    early = EarlyConnection(address_of(standin.url) or ("", 0))
    told: list[socket.socket] = []
    try:
        local = _early_end(early)
        with _client(early, told) as client:
            first = client.get(standin.url + "/api/version")
            assert first.status_code == 200
            assert _local_end(first) == local  # the same TCP connection: the pool did not connect on its own
            again = client.get(standin.url + "/api/version")
            assert _local_end(again) == local  # kept alive, as any connection
        assert early.taken
        assert told == []  # nothing was sent ahead, so nothing replaced it
    finally:
        early.close()
    assert standin.count(VERSION) == 2


def test_the_request_sent_ahead_is_answered_from_it_once(standin: StandIn) -> None:
    early = EarlyConnection(address_of(standin.url) or ("", 0))
    told: list[socket.socket] = []
    unclaimed: list[str] = []
    try:
        with _client(early, told) as client:
            _list_sent_ahead(standin, client, early, unclaimed)
            answer = client.get(standin.url + LIST_PATH, headers={"X-Token": FULL_TOKEN})
            assert answer.status_code == 200
            assert "default" in [b["branch"] for b in answer.json()["list"]]
            assert standin.count(LIST) == 1  # the client's request was not written again
            # Once: the next same request is the client's own, on the same kept-alive connection.
            assert client.get(standin.url + LIST_PATH, headers={"X-Token": FULL_TOKEN}).status_code == 200
            assert standin.count(LIST) == 2
        early.settle()
        assert unclaimed == []  # claimed: the client's own request
        assert told == []
    finally:
        early.close()


def test_another_first_request_goes_the_normal_way_on_a_new_connection(standin: StandIn) -> None:
    """The answer coming on the early connection is the list's: a request asked first must not read it as its own."""
    early = EarlyConnection(address_of(standin.url) or ("", 0))
    told: list[socket.socket] = []
    unclaimed: list[str] = []
    try:
        local = _early_end(early)
        with _client(early, told) as client:
            _list_sent_ahead(standin, client, early, unclaimed)
            answer = client.get(standin.url + "/api/version")
            assert answer.status_code == 200
            assert "list" not in answer.json()  # the version's answer, not the list sent ahead
            assert unclaimed == ["list"]  # counted once, when the request turned out to be another
            (replacement,) = told  # the watchdog is told the socket that replaced the early one
            assert _local_end(answer) == replacement.getsockname() != local
        early.settle()
        assert unclaimed == ["list"]
    finally:
        early.close()
    assert standin.count(LIST) == 1
    assert standin.count(VERSION) == 1


def test_a_refused_early_connect_is_the_pools_connect_error() -> None:
    address = _closed_address()
    url = f"http://{address[0]}:{address[1]}/api/version"
    early = EarlyConnection(address)
    try:
        with _client(early, []) as client, pytest.raises(httpx.ConnectError) as with_early:
            client.get(url)
    finally:
        early.close()
    with httpx.Client(timeout=10) as plain, pytest.raises(httpx.ConnectError) as without:
        plain.get(url)
    assert str(with_early.value) == str(without.value)


def test_a_connection_to_another_address_is_the_pools_own(standin: StandIn) -> None:
    other = _closed_address()
    early = EarlyConnection(other)  # refused, and never asked for: the stand-in is elsewhere
    try:
        host, port = address_of(standin.url) or ("", 0)
        stream = EarlyBackend(early, lambda _sock: None).connect_tcp(host, port, timeout=10)
        try:
            assert stream.get_extra_info("socket").getpeername()[1] == port
        finally:
            stream.close()
        assert not early.taken
    finally:
        early.close()


def test_a_transport_without_a_pool_closes_the_early_connection() -> None:
    with _early_to_listener() as (early, accepted):
        use_early(httpx.MockTransport(lambda request: httpx.Response(200)), early, lambda _sock: None)  # type: ignore[arg-type]
        assert early.taken
        assert accepted.recv(1024) == b""  # closed, and not a byte sent on it


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (TimeoutError("timed out"), httpcore.ConnectTimeout),
        (ConnectionRefusedError(111, "Connection refused"), httpcore.ConnectError),
        (OSError(101, "Network is unreachable"), httpcore.ConnectError),
    ],
)
def test_connect_errors_are_mapped_as_httpcore_maps_its_own(raised: OSError, expected: type[Exception]) -> None:
    with pytest.raises(expected) as info, connect_errors():
        raise raised
    assert str(info.value) == str(raised)
    assert info.value.__cause__ is raised
