"""A server behind TLS, as the official server and many private servers are: the stand-in served over real TLS on a
loopback port, with a certificate authority made for the test (trustme) that the tool trusts only through
``SSL_CERT_FILE``, the variable httpx reads. A run must deploy over it, through the connection opened early (its TCP
handshake begun before the fork for an IP address, TLS done by the HTTP client on it), and refuse a certificate it
cannot verify with one line that says so, before any request is written."""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import certifi
import pytest
import trustme

from gitops.app.headstart.start import HeadStart
from gitops.app.serverprobe import probe_version
from gitops.app.session import open_session
from gitops.core.early import ALPN, route_of
from gitops.core.health import ConsoleEvent
from gitops.edges.early import EarlyConnection, EarlyTLS, address_of
from gitops.edges.socket import console_events
from gitops.edges.tls import trust_context, trust_context_early
from gitops.errors import ExitCode, NetworkError
from gitops.secrets import Secret
from gitops.standin.testing import ALICE, DEMO_ACCOUNTS, FULL_TOKEN, StandIn, running_standin
from tests.edges.test_early import _client, _connected, _list_head, _options
from tests.project import one_branch_project

CODE = "POST /api/user/code"
LIST = "GET /api/user/branches"


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def _tls_standin(tmp_path: Path, authority: trustme.CA, *names: str) -> Iterator[StandIn]:
    pem = tmp_path / "server.pem"
    authority.issue_cert(*names).private_key_and_cert_chain_pem.write_to_path(str(pem))
    data = tmp_path / "standin"
    data.mkdir()
    with running_standin(DEMO_ACCOUNTS, data / "standin.sqlite3", tls=pem) as service:
        yield service
        _early_connects_done()


def _early_connects_done(timeout: float = 10.0) -> None:
    """Wait for the tool's early connections to end their TLS handshakes. Each runs in a thread of its own that a
    run does not wait for (the command's process ends anyway), so a handshake the tool refuses may still be failing
    when the run has returned; stopping the stand-in then would close its event loop under that connection."""
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread.name == "gitops-early-connect":
            thread.join(max(0.0, deadline - time.monotonic()))


@pytest.fixture
def tls_standin(tmp_path: Path, authority: trustme.CA) -> Iterator[StandIn]:
    """The stand-in over TLS, its certificate for 127.0.0.1 (the URL's host)."""
    yield from _tls_standin(tmp_path, authority, "127.0.0.1")


@pytest.fixture
def trusted(tmp_path: Path, authority: trustme.CA, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's authority trusted, as a user with a private authority trusts it."""
    bundle = tmp_path / "authority.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


@pytest.fixture
def untrusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the public authorities (certifi's bundle) trusted, as on a machine that never heard of the test's."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


def test_a_deploy_and_a_plan_over_tls(
    tmp_path: Path,
    tls_standin: StandIn,
    trusted: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert tls_standin.url.startswith("https://127.0.0.1:")
    p = one_branch_project(tmp_path, tls_standin, capsys, monkeypatch)
    result = p.apply("--yes", "--debug")
    assert result.code == 0, result.err
    assert tls_standin.branch_modules(ALICE, "main") == {"main": "module.exports.loop = () => {};\n"}
    again = p.plan("--debug")
    assert again.code == 0, again.err
    assert "No changes" in again.out
    assert "the branch list is sent ahead on the early connection" in again.err  # over TLS too (issue 40)
    assert "read on the early connection" in again.err
    assert FULL_TOKEN not in result.out + result.err + again.out + again.err


def _early_tls(url: str) -> EarlyConnection:
    """An early connection to ``url`` as the session makes it for an https:// server: TLS with the client's context,
    the URL's host name and the client's ALPN."""
    route = route_of(url)
    assert route is not None
    assert route.tls
    return EarlyConnection(route.address, tls=EarlyTLS(trust_context_early, route.server_hostname, ALPN))


def test_the_tls_connection_is_made_on_the_early_one(tls_standin: StandIn, trusted: None) -> None:
    """The connection opened early carries TLS, its handshake done before any client exists; the client's pool uses
    that very socket and that very context: it neither connects nor shakes hands again."""
    early = _early_tls(tls_standin.url)
    made = _connected(early)
    assert isinstance(made, ssl.SSLSocket)
    assert made.version() in ("TLSv1.2", "TLSv1.3")
    try:
        with _client(tls_standin.url, clock=tls_standin.clock, early=early) as client:
            pool = client._http._transport._pool  # type: ignore[attr-defined]
            assert pool._ssl_context is early.ssl_context(0)  # the pool's context is the one the handshake used
            assert client.list_branches() is not None
            used = client._connections.socket if client._connections is not None else None
            assert used is made  # the early TLS socket itself: no second handshake on the client's side
        assert early.take(early.address, 0) is None  # used once
    finally:
        early.close()


def test_a_tcp_only_early_connection_still_gets_the_pools_handshake(tls_standin: StandIn, trusted: None) -> None:
    """An early connection without TLS to an https:// server (a side read's): the pool's handshake on it."""
    early = EarlyConnection(address_of(tls_standin.url) or ("", 0))
    local_end = _connected(early).getsockname()
    try:
        with _client(tls_standin.url, clock=tls_standin.clock, early=early) as client:
            assert client.list_branches() is not None
            used = client._connections.socket if client._connections is not None else None
            assert isinstance(used, ssl.SSLSocket)
            assert used.getsockname() == local_end  # the early TCP connection, now under TLS
    finally:
        early.close()


def test_a_handshake_with_another_context_is_not_taken(tls_standin: StandIn, trusted: None) -> None:
    """Should the pool ask for another context than the early handshake used, the early socket is dropped and the
    pool shakes hands itself on a new connection; a list sent ahead on the early one is counted as sent, not read."""
    early = _early_tls(tls_standin.url)
    made = _connected(early)
    unclaimed: list[str] = []
    early.send_ahead(_list_head(tls_standin.url), lambda: unclaimed.append("list"))
    try:
        with _client(tls_standin.url, clock=tls_standin.clock, early=early) as client:
            client._http._transport._pool._ssl_context = trust_context()  # type: ignore[attr-defined]
            assert [b.name for b in client.list_branches()] == [b["branch"] for b in tls_standin.branches(ALICE)]
            used = client._connections.socket if client._connections is not None else None
            assert isinstance(used, ssl.SSLSocket)
            assert used is not made
        assert unclaimed == ["list"]
        assert made.fileno() == -1  # closed
    finally:
        early.close()


def test_the_early_handshake_offers_the_pools_alpn(tmp_path: Path, authority: trustme.CA, trusted: None) -> None:
    """A server that would speak HTTP/2 too agrees on the same protocol with the early handshake as with the pool's
    own (httpx without HTTP/2): the early connection is exactly the one the pool would have made."""
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_side)
    server_side.set_alpn_protocols(["h2", "http/1.1"])
    seen: list[str | None] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(2)
        listener.settimeout(10)
        url = f"https://127.0.0.1:{listener.getsockname()[1]}"

        def serve() -> None:
            for _ in range(2):
                accepted, _ = listener.accept()
                with server_side.wrap_socket(accepted, server_side=True, do_handshake_on_connect=False) as tls:
                    tls.settimeout(10)
                    with contextlib.suppress(OSError):
                        tls.do_handshake()
                        seen.append(tls.selected_alpn_protocol())

        server = threading.Thread(target=serve)
        server.start()
        early = _early_tls(url)
        try:
            made = _connected(early)
            assert isinstance(made, ssl.SSLSocket)
            assert made.selected_alpn_protocol() == "http/1.1"
            early.close()
            with _client(url, timeout=5) as client, pytest.raises(NetworkError):
                client.list_branches()  # the server closes after the handshake: only the handshake matters here
        finally:
            early.close()
            server.join(15)
    assert seen == ["http/1.1", "http/1.1"]


def test_a_certificate_refused_on_the_early_handshake_is_worded_as_the_pools_own(
    tmp_path: Path, authority: trustme.CA, trusted: None
) -> None:
    """A certificate for another name: the early handshake fails, and the client's first request reports it exactly
    as the pool's own handshake does, the TLS library's reason included."""
    for service in _tls_standin(tmp_path, authority, "localhost"):
        early = _early_tls(service.url)
        assert early._done.wait(10)
        assert isinstance(early._error, ssl.SSLCertVerificationError)
        messages = []
        for kwargs in ({"early": early}, {}):
            with _client(service.url, timeout=5, **kwargs) as client, pytest.raises(NetworkError) as info:
                client.list_branches()
            messages.append(info.value.message)
        early.close()
        assert messages[0] == messages[1]
        assert "TLS: CERTIFICATE_VERIFY_FAILED" in messages[0]
        assert service.count(LIST) == 0


class _Relay:
    """A loopback TCP relay in front of a server that counts the connections made through it and keeps what each
    client sent (at most 1 MB a connection): how many TLS handshakes the server saw, and whether anything went in
    clear. One thread, bounded waits; every socket closed when the block ends."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.sent: list[bytearray] = []  # per connection, in the order they were accepted
        self._stop = threading.Event()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Relay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        assert not self._thread.is_alive()

    def client_hellos(self, since: int = 0) -> int:
        """The TLS handshakes begun through the relay (from its ``since``-th connection on): connections whose first
        record is a ClientHello (one a connection: TLS 1.3 has no renegotiation)."""
        return sum(1 for data in self.sent[since:] if data[:1] == b"\x16" and data[5:6] == b"\x01")

    def in_clear(self) -> int:
        """Connections on which the client sent anything but TLS first (a connection closed unused sent nothing)."""
        return sum(1 for data in self.sent if data and data[:1] != b"\x16")

    def _run(self) -> None:
        peers: dict[socket.socket, tuple[socket.socket, bytearray | None]] = {}
        with selectors.DefaultSelector() as sel, self._listener:
            sel.register(self._listener, selectors.EVENT_READ)
            try:
                while not self._stop.is_set():
                    for key, _ in sel.select(0.05):
                        sock = key.fileobj
                        assert isinstance(sock, socket.socket)
                        if sock is self._listener:
                            client, _ = self._listener.accept()
                            upstream = socket.create_connection(self.target, 10)
                            sent = bytearray()
                            self.sent.append(sent)
                            peers[client], peers[upstream] = (upstream, sent), (client, None)
                            sel.register(client, selectors.EVENT_READ)
                            sel.register(upstream, selectors.EVENT_READ)
                            continue
                        other, record = peers[sock]
                        try:
                            data = sock.recv(65536)
                        except OSError:
                            data = b""
                        if not data:
                            for end in (sock, other):
                                sel.unregister(end)
                                peers.pop(end)
                                end.close()
                            continue
                        if record is not None and len(record) < 1 << 20:
                            record += data
                        other.settimeout(10)
                        other.sendall(data)
            finally:
                for end in peers:
                    end.close()


@pytest.fixture
def relayed(tls_standin: StandIn) -> Iterator[_Relay]:
    route = route_of(tls_standin.url)
    assert route is not None
    with _Relay(route.address) as relay:
        yield relay


def test_over_tls_the_list_is_sent_ahead_and_the_client_needs_no_second_handshake(
    tmp_path: Path,
    tls_standin: StandIn,
    relayed: _Relay,
    trusted: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted on the server's side of the connection: a plan that finds nothing changed makes one connection and one
    TLS handshake, the branch list on it sent ahead and read there; an apply that uploads, the same one connection
    for the list and the upload. The token never crosses in clear."""
    p = one_branch_project(tmp_path, tls_standin, capsys, monkeypatch)
    p.point_at(f"https://127.0.0.1:{relayed.port}")
    assert p.apply("--yes").code == 0  # a first contact: its reads ahead have connections of their own
    before, lists = len(relayed.sent), tls_standin.count(LIST)

    plan = p.plan("--debug")
    assert plan.code == 0, plan.err
    assert "No changes" in plan.out
    assert "the branch list is sent ahead on the early connection" in plan.err
    assert "read on the early connection" in plan.err
    assert tls_standin.count(LIST) == lists + 1
    assert len(relayed.sent) == before + 1
    assert relayed.client_hellos(before) == 1

    p.write({"src/main.js": "module.exports.loop = () => { /* 2 */ };\n"})
    p.commit()
    apply = p.apply("--yes", "--debug")
    assert apply.code == 0, apply.err
    assert "the branch list is sent ahead on the early connection" in apply.err
    assert tls_standin.branch_modules(ALICE, "main") == {"main": "module.exports.loop = () => { /* 2 */ };\n"}
    assert tls_standin.count(LIST) == lists + 2
    assert len(relayed.sent) == before + 2  # the list and the upload: one connection, one handshake
    assert relayed.client_hellos(before) == 2
    assert relayed.in_clear() == 0
    for data in relayed.sent:
        assert FULL_TOKEN.encode() not in data
    assert FULL_TOKEN not in plan.out + plan.err + apply.out + apply.err


def test_without_a_context_nothing_is_sent_on_an_https_route() -> None:
    """A TLS context that cannot be made (a missing SSL_CERT_FILE, say): the early connection gives up, and the list
    sent ahead, which carries the token, is never written on the bare TCP connection."""

    def broken() -> ssl.SSLContext:
        raise FileNotFoundError(2, "No such file or directory")

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(10)
        host, port = listener.getsockname()
        early = EarlyConnection((host, port), tls=EarlyTLS(broken, host, ALPN))
        early.send_ahead(_list_head(f"https://{host}:{port}"), lambda: None)
        accepted, _ = listener.accept()
        with accepted:
            accepted.settimeout(10)
            assert accepted.recv(1024) == b""  # closed, not a byte sent
        assert early._done.wait(10)
        assert early.ssl_context(0) is None
        assert not early.sent_ahead
        assert early.take(early.address, 0) is None  # the pool connects and shakes hands itself
        early.close()


def test_an_early_tls_connection_nobody_takes_is_closed(tls_standin: StandIn, trusted: None) -> None:
    early = _early_tls(tls_standin.url)
    made = _connected(early)
    unclaimed: list[str] = []
    early.send_ahead(_list_head(tls_standin.url), lambda: unclaimed.append("list"))
    early.close()
    early.settle()
    assert made.fileno() == -1
    assert unclaimed == ["list"]
    assert early.take(early.address, 0) is None


@pytest.mark.parametrize("names", [("localhost",), ("127.0.0.1",)], ids=["another-name", "unknown-authority"])
def test_a_certificate_that_cannot_be_verified_is_refused_before_any_request(
    names: tuple[str, ...],
    tmp_path: Path,
    authority: trustme.CA,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """A certificate for another name (the authority trusted), or from an authority nobody trusts: the run stops with
    the TLS reason, the network's exit code and no traceback, and the server never sees a request."""
    request.getfixturevalue("trusted" if names == ("localhost",) else "untrusted")
    for service in _tls_standin(tmp_path, authority, *names):
        p = one_branch_project(tmp_path, service, capsys, monkeypatch)
        result = p.apply("--yes", "--debug")
        assert result.code == ExitCode.FAILURE, (result.code, result.err)
        assert "retrying" not in result.err
        assert "TLS: CERTIFICATE_VERIFY_FAILED" in result.err
        assert "a name the certificate is for" in result.err
        assert "SSL_CERT_FILE" in result.err  # the fix for a private authority; never "turn verification off"
        assert "Traceback" not in result.err
        assert FULL_TOKEN not in result.out + result.err
        assert service.count(LIST) == 0
        assert service.count(CODE) == 0


def test_an_https_url_for_a_plain_http_server_says_to_write_http(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The usual slip with a private server (plain HTTP on its port): https:// in the url. The TLS library's reason
    is named, and the fix is the scheme, not the network."""
    p = one_branch_project(tmp_path, standin, capsys, monkeypatch)
    p.point_at("https" + standin.url.removeprefix("http"))
    result = p.apply("--yes", "--debug")
    assert result.code == ExitCode.FAILURE, (result.code, result.err)
    assert "retrying" not in result.err  # wrong now, wrong on every attempt: no backoff before the answer
    assert "TLS: WRONG_VERSION_NUMBER" in result.err
    assert "write the url with http://" in result.err
    assert "Traceback" not in result.err
    assert FULL_TOKEN not in result.out + result.err
    assert standin.count(CODE) == 0


# --- one trust for the HTTP client and the game socket ------------------------------------------------------------


def test_the_trusted_authorities_are_httpxs_rule(
    tmp_path: Path, authority: trustme.CA, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "authority.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    own = trust_context()
    assert [c["subject"] for c in own.get_ca_certs()] == [_subject(authority)]
    assert own.verify_mode == ssl.CERT_REQUIRED
    assert own.check_hostname
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    public = trust_context()
    assert len(public.get_ca_certs()) == Path(certifi.where()).read_text("ascii").count("BEGIN CERTIFICATE")


def _described(context: ssl.SSLContext) -> dict[str, object]:
    return {
        "protocol": context.protocol,
        "verify_mode": context.verify_mode,
        "verify_flags": context.verify_flags,
        "check_hostname": context.check_hostname,
        "options": context.options,
        "minimum_version": context.minimum_version,
        "maximum_version": context.maximum_version,
        "post_handshake_auth": context.post_handshake_auth,
        "keylog_filename": context.keylog_filename,
        "stats": context.cert_store_stats(),
        "authorities": context.get_ca_certs(),
        "ciphers": context.get_ciphers(),
    }


@pytest.mark.parametrize("case", ["SSL_CERT_FILE", "SSL_CERT_DIR", "certifi"])
def test_the_early_connections_context_is_httpxs_without_httpx(
    case: str, tmp_path: Path, authority: trustme.CA, monkeypatch: pytest.MonkeyPatch
) -> None:
    """trust_context_early writes httpx's rule out (so that a plan over https:// need not import httpx): in each of
    its three cases it makes the context httpx makes. An httpx that changes its rule fails here."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    bundle = tmp_path / "authority.pem"
    authority.cert_pem.write_to_path(str(bundle))
    if case == "SSL_CERT_FILE":
        monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    elif case == "SSL_CERT_DIR":
        monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    early, own = trust_context_early(), trust_context()
    assert _described(early) == _described(own)
    assert len(early.get_ca_certs()) == {"SSL_CERT_FILE": 1, "SSL_CERT_DIR": 0}.get(
        case, Path(certifi.where()).read_text("ascii").count("BEGIN CERTIFICATE")
    )


def _subject(authority: trustme.CA) -> object:
    probe = ssl.create_default_context(cadata=authority.cert_pem.bytes().decode("ascii"))
    (cert,) = probe.get_ca_certs()
    return cert["subject"]


def _console(service: StandIn) -> tuple[list[ConsoleEvent], str | None]:
    service.set_tick_seconds(0.02)
    service.console_rule(ALICE, log=["over tls"])
    account = service.app.accounts.user(ALICE)
    assert account is not None
    try:
        return console_events(
            service.socket_url, Secret(FULL_TOKEN), account.user_id, seconds=20, enough=lambda e: len(e) >= 2
        )
    finally:
        service.set_tick_seconds(0)


def test_the_game_socket_over_tls_trusts_what_the_http_client_trusts(
    tls_standin: StandIn, trusted: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wss:// verified against SSL_CERT_FILE (the system's store knows nothing of the test's authority), and
    connected directly even where HTTPS_PROXY names a proxy (nobody listens there), as the HTTP client is."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    assert tls_standin.socket_url.startswith("wss://127.0.0.1:")
    events, problem = _console(tls_standin)
    assert problem is None
    assert events[:2] == [ConsoleEvent(log=("over tls",))] * 2


def test_the_game_socket_refuses_a_certificate_it_cannot_verify(tls_standin: StandIn, untrusted: None) -> None:
    events, problem = _console(tls_standin)
    assert events == []
    assert problem is not None
    assert "CERTIFICATE_VERIFY_FAILED" in problem
    assert FULL_TOKEN not in problem


def test_init_s_probe_of_a_tls_server_trusts_what_the_client_trusts(tls_standin: StandIn, trusted: None) -> None:
    """``gitops init`` asks the server what it is before any manifest exists; over TLS it must trust SSL_CERT_FILE as
    the client will (httpx's trust_env=False, which keeps proxies out, would drop it)."""
    answer = probe_version(tls_standin.url)
    assert answer is not None
    assert answer.get("ok") == 1


def test_a_first_contacts_connections_all_shake_hands_early(
    tmp_path: Path, tls_standin: StandIn, trusted: None
) -> None:
    """A fresh ledger: the head start's early connections (the main one and those of the reads sent beside the list) are
    all under TLS before any client exists, each with the context its client's pool is then given."""
    options = _options(tmp_path, {"tls": tls_standin.url})
    with open_session(options) as s:
        start = HeadStart(s)
        start.connect()
        main = start._early["tls"]
        assert isinstance(main, EarlyConnection)  # a socket: no test transport here
        connections = [main, *start._side_early["tls"]]
        assert len(connections) >= 2
        for early in connections:
            assert isinstance(_connected(early), ssl.SSLSocket)
        contexts = [early.ssl_context(0) for early in connections]
        assert all(context is not None for context in contexts)
        assert len({id(context) for context in contexts}) == len(contexts)  # one pool, one context
        side = s.side_client("tls", s.ledger("tls"), start._side_early["tls"].pop())
        try:
            pool = side._http._transport._pool  # type: ignore[attr-defined]
            assert any(pool._ssl_context is context for context in contexts[1:])
        finally:
            side.close()
