"""A server behind TLS, as the official server and many private servers are: the stand-in served over real TLS on a
loopback port, with a certificate authority made for the test (trustme) that the tool trusts only through
``SSL_CERT_FILE``, the variable httpx reads. A run must deploy over it, through the connection opened early (its TCP
handshake begun before the fork for an IP address, TLS done by the HTTP client on it), and refuse a certificate it
cannot verify with one line that says so, before any request is written."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import certifi
import pytest
import trustme

from gitops.app.adopting import probe_version
from gitops.core.health import ConsoleEvent
from gitops.edges.early import EarlyConnection, address_of
from gitops.edges.socket import console_events
from gitops.edges.tls import trust_context
from gitops.errors import ExitCode
from gitops.secrets import Secret
from gitops.standin.testing import ALICE, DEMO_ACCOUNTS, FULL_TOKEN, StandIn, running_standin
from tests.project import one_branch_project
from tests.test_early_connection import _client, _connected

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
    assert "sent ahead" not in result.err  # over TLS nothing is written before the HTTP client's handshake
    again = p.plan()
    assert again.code == 0, again.err
    assert "No changes" in again.out
    assert FULL_TOKEN not in result.out + result.err + again.out + again.err


def test_the_tls_connection_is_made_on_the_early_one(tls_standin: StandIn, trusted: None) -> None:
    """The connection opened early carries TLS: the client's handshake runs on that TCP connection (it does not
    connect again), verified as any (the authority trusted through SSL_CERT_FILE)."""
    early = EarlyConnection(address_of(tls_standin.url) or ("", 0))
    local_end = _connected(early).getsockname()
    try:
        with _client(tls_standin.url, clock=tls_standin.clock, early=early) as client:
            assert client.list_branches() is not None
            used = client._connections.socket if client._connections is not None else None
            assert isinstance(used, ssl.SSLSocket)
            assert used.getsockname() == local_end  # the early TCP connection, now under TLS
            assert used.version() in ("TLSv1.2", "TLSv1.3")
        assert early.take(early.address, 0) is None  # used once
    finally:
        early.close()


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
