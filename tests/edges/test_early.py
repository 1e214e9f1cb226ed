"""The early TCP connection (``gitops.edges.early``): the client's first connection takes it, nothing is sent on
it before the client's own request, a failed one fails as the client's own connect would, and one nobody takes is
closed. Real sockets on loopback, the real stand-in."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gitops.app.headstart.localread import read_ahead
from gitops.app.headstart.start import HeadStart
from gitops.app.options import Options
from gitops.app.session import Session, open_session
from gitops.config.credentials import TokenAuth
from gitops.edges import early as early_module
from gitops.edges import headers as headers_module
from gitops.edges.early import (
    EarlyConnection,
    address_of,
    begin_connect,
    finish_connect,
    plain_head,
    request_head,
    same_request,
)
from gitops.edges.headers import request_headers
from gitops.edges.ledger import Ledger, SealKey
from gitops.edges.ledger.format import signed
from gitops.edges.ledger.seal import seal_body
from gitops.edges.service.client import ServiceClient
from gitops.errors import ExitCode, NetworkError, ServiceError
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
    return request_head(url, LIST_PATH, request_headers({"X-Token": token}))


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


def _write_ledger(path: Path, data: dict[str, Any], url: str) -> None:
    """``data`` written as a run holding the token writes it: checked and sealed with that token's key (a ledger
    edited without the seal is set aside, edges/ledger/seal.py)."""
    body = {key: value for key, value in data.items() if key not in ("check", "seal")}
    sealed = seal_body(
        json.dumps(body, separators=(",", ":")).encode("utf-8"), SealKey([FULL_TOKEN], Ledger.normal_url(url))
    )
    path.write_bytes(signed(sealed))


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
    _write_ledger(path, data, deployed.service.url)
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


# --- connects begun before the fork -----------------------------------------------------------------------------


def test_a_connect_to_an_ip_is_begun_in_this_thread_and_finished_by_its_early_connection() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(10)
        address: tuple[str, int] = listener.getsockname()
        assert begin_connect(("localhost", address[1])) is None  # a name: resolved by the helper thread, as before
        threads = threading.active_count()
        begun = begin_connect(address)
        assert begun is not None
        assert threading.active_count() == threads  # no thread: it may run just before a fork
        accepted, _ = listener.accept()  # the handshake was under way before any early connection existed
        with accepted:
            early = EarlyConnection(address, begun)
            assert _connected(early) is begun  # finished, not connected again
            assert begun.getblocking()  # as the pool's own sockets
            assert begun.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            taken = early.take(address, 5)
            assert taken is begun
            with taken:
                taken.sendall(b"x")
                assert accepted.recv(1) == b"x"


def test_a_refused_begun_connect_fails_as_the_clients_own_connect() -> None:
    with socket.socket() as probe:  # a loopback port with nobody listening
        probe.bind(("127.0.0.1", 0))
        address: tuple[str, int] = probe.getsockname()
    url = f"http://127.0.0.1:{address[1]}"
    begun = begin_connect(address)  # refused at once (None), or once the helper thread waits for it
    early = EarlyConnection(address, begun)
    with _client(url, timeout=2, early=early) as client, pytest.raises(NetworkError) as info:
        client.list_branches()
    with _client(url, timeout=2) as client, pytest.raises(NetworkError) as own:
        client.list_branches()
    assert info.value.message == own.value.message
    assert begun is None or begun.fileno() == -1  # closed, not left open
    early.close()


def _options(tmp_path: Path, urls: dict[str, str]) -> Options:
    manifest = tmp_path / "gitops.yaml"
    servers = {name: {"url": url, "token_env": "SCREEPS_TOKEN"} for name, url in urls.items()}
    branches = [{"server": name, "branch": "main", "root": "src"} for name in urls]
    manifest.write_text(json.dumps({"version": 1, "servers": servers, "branches": branches}), encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.js").write_text("module.exports.loop = () => {};\n", encoding="utf-8")
    return Options(manifest=manifest, env={"SCREEPS_TOKEN": FULL_TOKEN}, state_dir=tmp_path / "state")


def test_read_ahead_begins_the_connects_of_ip_servers_before_it_forks(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(2)
        listener.settimeout(10)
        port = listener.getsockname()[1]
        options = _options(tmp_path, {"ip": f"http://127.0.0.1:{port}", "named": f"http://localhost:{port}"})
        reading = read_ahead(options)
        try:
            begun = reading.take_connections()
            assert sorted(begun) == ["ip"]  # a host name is connected by the head start's early connection
            assert reading.take_connections() == {}  # handed over once
            accepted, _ = listener.accept()
            with accepted, begun["ip"]:
                assert finish_connect(begun["ip"], 5).getpeername() == accepted.getsockname()
        finally:
            reading.cancel()
        reading = read_ahead(options)
        kept = dict(reading._connections)
        reading.cancel()  # a run that failed before its session took them: closed, not leaked
        assert sorted(kept) == ["ip"]
        assert kept["ip"].fileno() == -1


def test_a_session_closes_the_begun_connects_it_does_not_use(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(10)
        address: tuple[str, int] = listener.getsockname()
        # A plan that asks nothing: no early connection (the options are frozen: a copy with another refresh).
        options = replace(_options(tmp_path, {"ip": f"http://{address[0]}:{address[1]}"}), refresh="never")
        begun = begin_connect(address)
        assert begun is not None
        with open_session(options) as s:
            HeadStart(s).connect({"ip": begun})
        assert begun.fileno() == -1


# --- the branch list read on the early connection ---------------------------------------------------------------


def _answer(body: bytes, *fields: bytes) -> bytes:
    head = b"".join(field + b"\r\n" for field in (b"HTTP/1.1 200 OK", *fields))
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


@contextlib.contextmanager
def _answering(*answers: bytes) -> Iterator[tuple[str, list[bytes]]]:
    """A loopback server of this test that serves one connection: it keeps the head of each request it reads and
    answers it with the next of ``answers`` (bytes as they go on the wire); its URL, and the heads it read."""
    heads: list[bytes] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(10)

        def serve() -> None:
            accepted, _ = listener.accept()
            with accepted:
                accepted.settimeout(10)
                data = b""
                for answer in answers:
                    while b"\r\n\r\n" not in data:
                        piece = accepted.recv(65536)
                        if not piece:
                            return
                        data += piece
                    head, _, data = data.partition(b"\r\n\r\n")
                    heads.append(head)
                    accepted.sendall(answer)
                with contextlib.suppress(OSError):
                    while accepted.recv(65536):
                        pass

        server = threading.Thread(target=serve)
        server.start()
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}", heads
        finally:
            server.join(15)


def _list_sent_ahead(url: str, counted: list[str]) -> EarlyConnection:
    early = EarlyConnection(address_of(url) or ("", 0))
    early.send_ahead(_list_head(url), lambda: counted.append("list"))
    return early


BRANCHES = b'{"ok":1,"list":[{"branch":"main","activeWorld":true,"activeSim":false,"timestamp":1}]}'


def test_a_plain_answer_is_read_on_the_early_connection_which_a_client_then_reuses() -> None:
    counted: list[str] = []
    with _answering(_answer(BRANCHES), _answer(b'{"ok":1,"list":[]}')) as (url, heads):
        early = _list_sent_ahead(url, counted)
        try:
            answer = early.answer_ahead(time.monotonic() + 10, 1 << 20)
            assert answer is not None
            assert (answer.body, answer.close) == (BRANCHES, False)
            assert answer.fields["content-length"] == str(len(BRANCHES))
            assert counted == []  # read, not yet taken: the caller decides
            early.accept_answer(answer)
            assert counted == ["list"]  # counted once, as the client counts a request it sends
            with _client(url, timeout=10, early=early) as client:
                assert client.list_branches() == []  # its own request, on the same connection
        finally:
            early.close()
    assert len(heads) == 2  # one connection carried both
    assert counted == ["list"]


def test_a_compressed_plain_answer_is_decoded() -> None:
    packed = gzip.compress(BRANCHES)
    with _answering(_answer(packed, b"Content-Encoding: gzip", b"Connection: close")) as (url, _heads):
        early = _list_sent_ahead(url, [])
        try:
            answer = early.answer_ahead(time.monotonic() + 10, 1 << 20)
            assert answer is not None
            assert (answer.body, answer.close) == (BRANCHES, True)
            early.accept_answer(answer)
            assert early._socket is None  # the server closes it: no client may reuse it
            assert early.take(early.address, 0) is None
        finally:
            early.close()


def test_an_answer_that_is_not_plain_is_read_by_the_client_from_its_first_byte() -> None:
    """A chunked answer (the HTTP client's to read): the bytes read on the early connection are the client's first,
    so it reads the whole answer, and the request is neither sent again nor counted twice."""
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(BRANCHES), BRANCHES)
    counted: list[str] = []
    with _answering(chunked) as (url, heads):
        early = _list_sent_ahead(url, counted)
        try:
            assert early.answer_ahead(time.monotonic() + 10, 1 << 20) is None
            assert early._replay  # what was read waits for the client
            with _client(url, timeout=10, early=early) as client:
                assert [b.name for b in client.list_branches()] == ["main"]
        finally:
            early.close()
    assert len(heads) == 1
    assert counted == []  # claimed by the client, which counted it as its own


def test_a_plain_answer_the_caller_does_not_take_is_the_clients_to_word() -> None:
    refusal = b'{"ok":0,"error":"not today"}'
    with _answering(_answer(refusal)) as (url, heads):
        early = _list_sent_ahead(url, [])
        try:
            answer = early.answer_ahead(time.monotonic() + 10, 1 << 20)
            assert answer is not None
            assert answer.body == refusal  # not a list of branches: the session leaves it to the client
            with _client(url, timeout=10, early=early) as client, pytest.raises(ServiceError) as info:
                client.list_branches()
        finally:
            early.close()
    assert "not today" in info.value.message
    assert len(heads) == 1


def test_an_answer_over_the_cap_or_late_is_left_to_the_client() -> None:
    with _answering(_answer(BRANCHES)) as (url, _heads):
        early = _list_sent_ahead(url, [])
        try:
            assert early.answer_ahead(time.monotonic() + 10, len(BRANCHES) - 1) is None
            assert early.answer_ahead(time.monotonic() + 10, 1 << 20) is None  # read once: the client's now
        finally:
            early.close()
    with _answering() as (url, _heads):  # a server that never answers
        early = _list_sent_ahead(url, [])
        try:
            started = time.monotonic()
            assert early.answer_ahead(started + 0.2, 1 << 20) is None
            assert time.monotonic() - started < 5
        finally:
            early.close()


def test_a_connection_idle_past_the_keepalive_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(early_module, "KEEPALIVE_SECONDS", 0.0)
    with _answering(_answer(BRANCHES)) as (url, _heads):
        early = _list_sent_ahead(url, [])
        try:
            answer = early.answer_ahead(time.monotonic() + 10, 1 << 20)
            assert answer is not None
            early.accept_answer(answer)
            kept = early._socket
            assert kept is not None
            time.sleep(0.01)
            assert early.take(early.address, 0) is None  # the pool connects afresh instead
            assert kept.fileno() == -1
        finally:
            early.close()


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2",
        b"HTTP/1.1 200\r\nContent-Length: 0",
        b"HTTP/1.1 200 OK\r\ncontent-length:2\r\nContent-Encoding: deflate\r\nX-RateLimit-Limit: 1",
    ],
)
def test_plain_heads(head: bytes) -> None:
    read = plain_head(head)
    assert read is not None
    assert read.length == int(read.fields["content-length"])


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.0 200 OK\r\nContent-Length: 2",
        b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 2",
        b"HTTP/1.1 204 No Content\r\nContent-Length: 0",
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2",
        b"HTTP/1.1 200 OK\r\nContent-Length: -2",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Encoding: br",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Encoding: gzip, gzip",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Folded: a\r\n b",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nNo colon here",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Control: a\x01b",
        b"HTTP/1.1 200 OK\r\nContent-Length : 2",
    ],
)
def test_heads_that_are_not_plain(head: bytes) -> None:
    assert plain_head(head) is None


def test_the_rate_limit_fields_of_a_plain_answer_are_read_as_the_client_reads_them() -> None:
    read = plain_head(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive, Close\r\nX-A: 1\r\nX-A: 2")
    assert read is not None
    assert read.close
    assert read.fields["x-a"] == "1, 2"  # repeated fields joined, as httpx's headers give them


def test_a_plan_that_changes_nothing_makes_no_http_client(deployed: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """The list sent ahead is read on the early connection: a plan that needs nothing more never makes a client
    (nor imports the HTTP client: ``tests/test_startup_imports.py``)."""

    def no_client(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a client was made")

    on_server = deployed.service.count(LIST)
    in_ledger = len(_ledger_sent(deployed.state_dir)["sent"][LIST])
    with monkeypatch.context() as patched:
        patched.setattr(Session, "_new_client", no_client)
        result = deployed.plan("--debug")
    assert result.code == 0, result.err
    assert "read on the early connection" in result.err
    assert "No changes" in result.out
    assert deployed.service.count(LIST) == on_server + 1
    assert len(_ledger_sent(deployed.state_dir)["sent"][LIST]) == in_ledger + 1
    # A change: the client is made for the upload, after the list was read without it.
    deployed.write({"src/main.js": "module.exports.loop = () => { /* 2 */ };\n"})
    result = deployed.apply("--yes", "--debug")
    assert result.code == 0, result.err
    assert "read on the early connection" in result.err
    assert "2 */" in str((deployed.service.branch_modules(ALICE, "main") or {}).get("main"))
    assert FULL_TOKEN not in result.out + result.err


def test_a_refused_token_on_the_list_sent_ahead_is_the_clients_error(
    deployed: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCREEPS_TOKEN", "x" * 40)
    on_server = deployed.service.count(LIST)
    result = deployed.plan("--debug")
    assert result.code == ExitCode.CREDENTIALS, result.err
    assert "the branch list is sent ahead" in result.err
    assert "401 on GET /api/user/branches" in result.err
    assert deployed.service.count(LIST) == on_server + 1  # read by the client, not asked again


def test_a_list_unanswered_within_the_clients_timeout_is_its_timeout_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Waited for without the client, an answer that does not come fails as the client's own request would, in the
    same time: not after a second wait as long by the client."""
    monkeypatch.setattr(headers_module, "REQUEST_SECONDS", 0.3)
    with _answering() as (url, _heads):  # accepts, never answers
        options = _options(tmp_path, {"silent": url})
        with open_session(options) as s:
            start = HeadStart(s)
            start.connect()
            s.ledger("silent")
            start.send_lists()
            assert start.lists_ahead("silent")
            # Written before the wait begins: on a loaded machine the helper thread's connect may take longer than
            # the 0.3 s allowed here, and a list never written is rightly never counted (what this test counts).
            _wait_for(lambda: start._early["silent"].sent_ahead, "the list written on the early connection")
            started = time.monotonic()
            with pytest.raises(NetworkError) as info:
                start.listed_ahead("silent")
            waited = time.monotonic() - started
            assert "did not answer GET /api/user/branches within" in info.value.message
            assert waited < 5
        sent = _ledger_sent(tmp_path / "state")["sent"][LIST]
    assert len(sent) == 1  # sent once, counted once
