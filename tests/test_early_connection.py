"""The early TCP connection (``gitops.edges.early``): the client's first connection takes it, nothing is sent on
it before the client's own request, a failed one fails as the client's own connect would, and one nobody takes is
closed. Real sockets on loopback, the real stand-in."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gitops.config.credentials import TokenAuth
from gitops.edges.client import ServiceClient
from gitops.edges.early import EarlyConnection, address_of, request_head, same_request
from gitops.edges.headers import CLIENT_HEADERS
from gitops.errors import NetworkError
from gitops.secrets import Secret
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.project import Project, one_branch_project


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


# --- the branch list sent ahead ---------------------------------------------------------------------------------

LIST_PATH = "/api/user/branches"
LIST = f"GET {LIST_PATH}"


def _list_head(url: str, token: str = FULL_TOKEN) -> bytes:
    return request_head(url, LIST_PATH, {**CLIENT_HEADERS, "X-Token": token})


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _first_request_of_client(url_path: str = "") -> tuple[bytes, str]:
    """What the client writes for its first branch list, caught by a loopback listener of this test (which answers
    an empty list), and the server URL it was sent to."""
    caught: list[bytes] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(10)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}{url_path}"

        def serve() -> None:
            accepted, _ = listener.accept()
            with accepted:
                accepted.settimeout(10)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += accepted.recv(65536)
                caught.append(data)
                body = b'{"ok":1,"list":[]}'
                accepted.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

        server = threading.Thread(target=serve)
        server.start()
        try:
            with _client(url, timeout=10) as client:
                assert client.list_branches() == []
        finally:
            server.join(15)
    return caught[0], url


@pytest.mark.parametrize("url_path", ["", "/season/"])
def test_the_head_sent_ahead_is_the_one_the_client_writes(url_path: str) -> None:
    """The fast path is taken only when the two are the same request: this fails when the HTTP library (or the
    client) changes what the branch list carries, instead of every run silently paying a new connection."""
    written, url = _first_request_of_client(url_path)
    assert written.startswith(f"GET {url_path.rstrip('/')}{LIST_PATH} HTTP/1.1\r\n".encode())
    assert same_request(_list_head(url), written)
    assert not same_request(_list_head(url, FULL_TOKEN + "x"), written)


def test_same_request_is_the_line_and_the_headers_in_any_order() -> None:
    head = b"GET /a HTTP/1.1\r\nHost: h:1\r\nX-Token: t\r\n\r\n"
    assert same_request(head, b"GET /a HTTP/1.1\r\nx-token:  t\r\nHOST: h:1\r\n\r\n")
    assert not same_request(head, b"GET /b HTTP/1.1\r\nHost: h:1\r\nX-Token: t\r\n\r\n")
    assert not same_request(head, b"GET /a HTTP/1.1\r\nHost: h:1\r\nX-Token: u\r\n\r\n")
    assert not same_request(head, b"GET /a HTTP/1.1\r\nHost: h:1\r\nX-Token: t\r\nX-More: 1\r\n\r\n")
    assert not same_request(head, head[:-2])  # not a whole head
    assert not same_request(b"GET /a HTTP/1.1\r\nno colon\r\n\r\n", b"GET /a HTTP/1.1\r\nno colon\r\n\r\n")


def test_request_head_host_as_the_client_writes_it() -> None:
    assert _list_head("http://[::1]:21025").split(b"\r\n")[1] == b"Host: [::1]:21025"
    assert _list_head("http://Example.org:80/").split(b"\r\n")[:2] == [
        b"GET /api/user/branches HTTP/1.1",
        b"Host: example.org",
    ]


def _sent_ahead(standin: StandIn, unclaimed: list[str]) -> EarlyConnection:
    """An early connection to the stand-in with the branch list sent ahead on it, which the server has received
    (before any client exists); ``unclaimed`` notes when it is counted as unclaimed."""
    early = EarlyConnection(address_of(standin.url) or ("", 0))
    early.send_ahead(_list_head(standin.url), lambda: unclaimed.append("list"))
    _wait_for(lambda: standin.count(LIST) == 1, "the branch list was not sent ahead")
    return early


def test_a_list_sent_ahead_is_the_answer_to_the_clients_first_request(standin: StandIn) -> None:
    unclaimed: list[str] = []
    early = _sent_ahead(standin, unclaimed)
    try:
        with _client(standin.url, clock=standin.clock, early=early) as client:
            names = [b.name for b in client.list_branches()]
            assert "default" in names
            assert standin.count(LIST) == 1  # not sent a second time
            assert early.taken
            client.list_branches()  # the same connection, kept alive
            assert standin.count(LIST) == 2
        early.settle()
        assert unclaimed == []  # claimed: the client counted it as its own
    finally:
        early.close()


def test_another_first_request_goes_out_on_a_new_connection(standin: StandIn) -> None:
    """The answer on the early connection is the list's: a download asked first must not read it as its own."""
    unclaimed: list[str] = []
    early = _sent_ahead(standin, unclaimed)
    try:
        early_end = _connected_end(early)
        with _client(standin.url, clock=standin.clock, early=early) as client:
            code = client.get_code("default")
            assert code is not None
            assert code.names() == ["main"]
            assert unclaimed == ["list"]  # counted once, when the client's request turned out to be another
            used = client._connections.socket if client._connections is not None else None
            assert used is not None
            assert used.getsockname() != early_end
            assert [b.name for b in client.list_branches()] == [b["branch"] for b in standin.branches(ALICE)]
        early.settle()
        assert unclaimed == ["list"]
        assert standin.count(LIST) == 2
        assert standin.count("GET /api/user/code") == 1
    finally:
        early.close()


def test_a_list_sent_ahead_that_nobody_takes_is_counted_once(standin: StandIn) -> None:
    unclaimed: list[str] = []
    early = _sent_ahead(standin, unclaimed)
    early.close()
    early.settle()
    early.settle()
    assert unclaimed == ["list"]
    assert early._ahead is None  # the credentials are not kept


def test_nothing_is_sent_ahead_on_a_refused_or_taken_connection() -> None:
    unclaimed: list[str] = []
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    refused = EarlyConnection(address_of(url) or ("", 0))
    refused.send_ahead(_list_head(url), lambda: unclaimed.append("refused"))
    assert refused._done.wait(10)
    with pytest.raises(ConnectionRefusedError):
        refused.take(refused.address, 1)
    refused.settle()
    with _early_to_listener() as (early, accepted):
        taken = early.take(early.address, 1)
        assert taken is not None
        with taken:
            early.send_ahead(_list_head(url), lambda: unclaimed.append("taken"))
            early.settle()
            taken.shutdown(socket.SHUT_WR)
            assert accepted.recv(1024) == b""  # not a byte
    assert unclaimed == []
    assert not refused.sent_ahead
    assert not early.sent_ahead


def _connected_end(early: EarlyConnection) -> tuple[str, int]:
    _wait_for(lambda: early.sent_ahead, "not connected")
    assert early._socket is not None
    name: tuple[str, int] = early._socket.getsockname()
    return name


def _ledger_sent(state_dir: Path) -> dict[str, Any]:
    (path,) = state_dir.glob("ledger/*/*.json")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@pytest.fixture
def deployed(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    """A project deployed once to the stand-in (its ledger kept), over real sockets: the CLI's own connections."""
    p = one_branch_project(tmp_path, standin, capsys, monkeypatch)
    assert p.apply("--yes").code == 0
    return p


def test_a_plan_sends_its_branch_list_ahead_and_counts_it_once(deployed: Project) -> None:
    standin = deployed.service
    on_server, in_ledger = standin.count(LIST), len(_ledger_sent(deployed.state_dir)["sent"][LIST])
    result = deployed.plan("--debug")
    assert result.code == 0, result.err
    assert "the branch list is sent ahead" in result.err
    assert "No changes" in result.out
    assert standin.count(LIST) == on_server + 1  # once: the client did not send it again
    assert len(_ledger_sent(deployed.state_dir)["sent"][LIST]) == in_ledger + 1  # and counted it once
    assert FULL_TOKEN not in result.out + result.err


def test_no_list_is_sent_ahead_when_the_minute_is_full(deployed: Project) -> None:
    """The client paces its requests under the global limit; a request sent ahead would not be, so none is."""
    (path,) = deployed.state_dir.glob("ledger/*/*.json")
    data = _ledger_sent(deployed.state_dir)
    now = deployed.service.clock.now()
    data["sent"][LIST] = [[now - 1, 1000 + i] for i in range(120)]
    data["seq"] = 1200
    path.write_text(json.dumps(data), encoding="utf-8")
    on_server = deployed.service.count(LIST)
    result = deployed.plan("--debug")
    assert result.code == 0, result.err
    assert "sent ahead" not in result.err
    assert "pacing" in result.err  # the client's own request waited for the minute instead
    assert deployed.service.count(LIST) == on_server + 1


def test_a_socket_connected_as_the_wait_gives_up_is_used_not_dropped() -> None:
    """The connect ends just after the client's wait for it did: the socket (which may carry the list sent ahead) is
    the client's, not dropped unclosed."""
    with _early_to_listener() as (early, accepted):
        early._done.clear()  # the moment between the socket being kept and the connect saying it is done
        taken = early.take(early.address, 0)
        assert taken is not None
        with taken:
            taken.sendall(b"x")
            assert accepted.recv(1) == b"x"  # the early connection itself
