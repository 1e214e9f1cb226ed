"""The early TCP connection (``gitops.edges.early``): the client's first connection takes it, nothing is sent on
it before the client's own request, a failed one fails as the client's own connect would, and one nobody takes is
closed. Real sockets on loopback, the real stand-in."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from gitops.config.credentials import TokenAuth
from gitops.edges.client import ServiceClient
from gitops.edges.early import EarlyConnection, address_of
from gitops.errors import NetworkError
from gitops.secrets import Secret
from gitops.standin.testing import FULL_TOKEN, StandIn


def _client(url: str, **kwargs: Any) -> ServiceClient:
    auth = TokenAuth(Secret(FULL_TOKEN), "the environment variable SCREEPS_TOKEN")
    return ServiceClient(server_name="local", url=url, auth=auth, **kwargs)


def _connected(early: EarlyConnection) -> socket.socket:
    assert early._done.wait(10), "the early connect did not finish"
    assert early._socket is not None, early._error
    return early._socket


def test_address_of_urls() -> None:
    assert address_of("http://127.0.0.1:21025") == ("127.0.0.1", 21025)
    assert address_of("https://screeps.com/season/") == ("screeps.com", 443)
    assert address_of("http://example.org") == ("example.org", 80)
    assert address_of("ftp://example.org") is None
    assert address_of("http://127.0.0.1:99999") is None


def test_the_clients_first_connection_is_the_early_one(standin: StandIn) -> None:
    early = EarlyConnection(address_of(standin.url) or ("", 0))
    local_end = _connected(early).getsockname()
    try:
        with _client(standin.url, clock=standin.clock, early=early) as client:
            client.list_branches()
            used = client._connections.socket if client._connections is not None else None
            assert used is not None
            assert used.getsockname() == local_end  # the same TCP connection: the pool did not connect on its own
            client.list_branches()  # kept alive, as without it
        assert early.take(early.address, 0) is None  # used once
    finally:
        early.close()


def test_a_refused_early_connect_fails_as_the_clients_own_connect() -> None:
    with socket.socket() as probe:  # a loopback port with nobody listening
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    early = EarlyConnection(address_of(url) or ("", 0))
    messages = []
    for kwargs in ({"early": early}, {}):
        with _client(url, timeout=2, **kwargs) as client, pytest.raises(NetworkError) as info:
            client.list_branches()
        messages.append(info.value.message)
    assert messages[0] == messages[1]
    assert "refused" in messages[0].lower()
    early.close()


@contextlib.contextmanager
def _early_to_listener() -> Iterator[tuple[EarlyConnection, socket.socket]]:
    """An early connection to a loopback listener of this test, connected, and the listener's end of it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(10)
        early = EarlyConnection(listener.getsockname())
        accepted, _ = listener.accept()
        with accepted:
            accepted.settimeout(10)
            _connected(early)
            yield early, accepted


def test_an_early_connection_sends_nothing_and_closes_when_nobody_takes_it() -> None:
    with _early_to_listener() as (early, accepted):
        early.close()
        assert accepted.recv(1024) == b""  # end of stream, and not a byte before it
    assert early.take(early.address, 0) is None


def test_a_client_closes_the_early_connection_it_was_given_and_never_used() -> None:
    """A read sent ahead whose request never went out (its side client closed unused) leaves no socket open: the
    client closes the early connection it was given, and the server sees the connection end."""
    with _early_to_listener() as (early, accepted):
        host, port = early.address
        with _client(f"http://{host}:{port}", early=early):
            pass  # no request
        assert early._socket is None
        assert accepted.recv(1024) == b""  # closed by the client's close, not left to the garbage collector
