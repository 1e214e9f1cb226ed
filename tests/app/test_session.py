"""The session of one run (``gitops.app.session``): credentials, ledgers and clients of the servers it talks to,
opened when first asked for, the ledgers locked in the order of their files' paths, saved and closed together.

Against the real stand-in on loopback, with real ledger files in a temporary state folder."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gitops.app.options import Options
from gitops.app.session import open_session, servers_of
from gitops.app.targets import Targets
from gitops.config.manifest import load_manifest
from gitops.edges.clock import ManualClock
from gitops.edges.ledger import Ledger
from gitops.edges.service.observer import Unobserved
from gitops.errors import AuthError, LedgerBusyError
from gitops.standin.testing import ALICE, ALICE_PASSWORD, FULL_TOKEN, StandIn
from tests.factories import write_manifest

LIST = "GET /api/user/branches"
QUERY = "GET /api/auth/query-token"


def _closed_url() -> str:
    """A loopback URL nobody listens on: a session that contacted it would fail."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def _options(tmp_path: Path, servers: dict[str, dict[str, Any]], env: dict[str, str], **extra: Any) -> Options:
    branches = [{"server": name, "branch": f"b-{name}", "root": "src"} for name in servers]
    manifest = write_manifest(tmp_path / "bot", servers=servers, branches=branches)
    return Options(
        manifest=manifest,
        env={"GITOPS_LOCK_WAIT": "0.2", **env},
        state_dir=tmp_path / "state",
        clock=extra.pop("clock", ManualClock(1_800_000_000.0)),
        **extra,
    )


def _token(url: str) -> dict[str, Any]:
    return {"url": url, "token_env": "SCREEPS_TOKEN"}


def test_a_session_reads_the_stand_in_through_a_reader_that_cannot_write(tmp_path: Path, standin: StandIn) -> None:
    options = _options(tmp_path, {"local": _token(standin.url)}, {"SCREEPS_TOKEN": FULL_TOKEN}, clock=standin.clock)
    with open_session(options) as session:
        assert not session.has_client("local")
        reader = session.reader("local")
        assert session.has_client("local")
        assert "default" in [b.name for b in reader.list_branches()]
        # The narrow view has no method that writes; the writer is the client itself.
        for writes in ("upload_code", "clone_branch", "set_active_branch"):
            assert not hasattr(reader, writes)
            assert callable(getattr(session.writer("local"), writes))
        assert session.writer("local") is session.client("local")
    assert standin.count(LIST) == 1
    # Closed: the ledger was saved with what the client told it, and its lock released for the next run.
    (path,) = (tmp_path / "state" / "ledger").glob("*/*.json")
    assert LIST in path.read_text(encoding="utf-8")
    Ledger.open(tmp_path / "state", standin.url, None, clock=standin.clock, lock_wait=0).close()


def test_nothing_is_opened_or_contacted_before_it_is_asked_for(tmp_path: Path) -> None:
    options = _options(tmp_path, {"far": _token(_closed_url())}, {"SCREEPS_TOKEN": FULL_TOKEN})
    with open_session(options) as session:
        assert session.servers() == ["far"]
        assert session.has_credentials("far")
        assert not session.has_client("far")
        assert session.warnings() == []
    assert not (tmp_path / "state").exists()  # no ledger opened, none written


def test_the_session_sees_only_the_chosen_servers(tmp_path: Path) -> None:
    servers = {"a": _token(_closed_url()), "b": _token(_closed_url())}
    options = _options(tmp_path, servers, {"SCREEPS_TOKEN": FULL_TOKEN}, targets=Targets.of(["b"]))
    with open_session(options) as session:
        assert session.servers() == ["b"]
    assert servers_of(load_manifest(options.manifest)) == ["a", "b"]


def test_credentials_missing_are_named_when_asked_for_and_not_before(tmp_path: Path) -> None:
    options = _options(tmp_path, {"far": _token(_closed_url())}, {})
    with open_session(options) as session:
        assert not session.has_credentials("far")
        assert session.login("far") is None
        with pytest.raises(AuthError) as info:
            session.auth("far")
        assert "SCREEPS_TOKEN" in info.value.message
        # Without credentials the ledger last written for the server is read; its budget counts as limited.
        assert session.budget_facts("far").limited
        assert session.scope("far") is None


def test_a_token_login_is_rate_limited_and_a_password_login_spends_no_budget(tmp_path: Path) -> None:
    url = _closed_url()
    servers = {
        "token": _token(url),
        "private": {"url": url + "/private", "username_env": "U", "password_env": "P"},
    }
    env = {"SCREEPS_TOKEN": FULL_TOKEN, "U": ALICE, "P": ALICE_PASSWORD}
    with open_session(_options(tmp_path, servers, env)) as session:
        token, private = session.login("token"), session.login("private")
        assert token is not None
        assert private is not None
        assert (token.rate_limited, token.signs_in) == (True, False)
        assert (private.rate_limited, private.signs_in) == (False, True)
        assert session.budget_facts("token").limited
        assert not session.budget_facts("private").limited
        # A password login has nothing to learn from the token query: no request is made (nobody listens there).
        assert session.scope("private") is None
        assert session.learn_unlimited("private") is False
        assert session.unlimited_now("token") is False


def test_compression_the_manifest_decides_asks_nothing_of_the_ledger(tmp_path: Path) -> None:
    url = _closed_url()
    servers = {"on": {**_token(url), "compress": "always"}, "off": {**_token(url + "/x"), "compress": "never"}}
    with open_session(_options(tmp_path, servers, {"SCREEPS_TOKEN": FULL_TOKEN})) as session:
        assert session.compression("on") == "on"
        assert session.compression("off") == "off"
    assert not (tmp_path / "state").exists()


def test_auto_compression_without_a_known_branch_list_sends_no_probe(tmp_path: Path) -> None:
    with open_session(_options(tmp_path, {"s": _token(_closed_url())}, {"SCREEPS_TOKEN": FULL_TOKEN})) as session:
        # Nothing recorded and no list known: the probe's branch may exist, so uploads go uncompressed.
        assert session.compression("s") == "off"


def test_two_names_for_one_server_and_account_share_one_ledger(tmp_path: Path) -> None:
    url = _closed_url()
    servers = {"first": _token(url), "second": _token(url + "/")}
    with open_session(_options(tmp_path, servers, {"SCREEPS_TOKEN": FULL_TOKEN})) as session:
        assert session.ledger("first") is session.ledger("second")
    assert len(list((tmp_path / "state" / "ledger").glob("*/*.json.lock"))) == 1


@contextlib.contextmanager
def _held(state_dir: Path, url: str, fingerprint: str) -> Iterator[None]:
    """The ledger of ``url`` locked by another holder for the block (as another run would hold it)."""
    other = Ledger.open(state_dir, url, fingerprint, clock=ManualClock(0), lock_wait=0)
    try:
        yield
    finally:
        other.close()


def test_the_ledgers_are_locked_in_the_order_of_their_paths(tmp_path: Path) -> None:
    """The first ledger asked for opens all of the session's, in the order of their files' paths, whatever the
    servers are called: two runs naming the same servers otherwise never wait for each other's second lock."""
    urls = sorted([_closed_url(), _closed_url() + "/season"])
    state_dir = tmp_path / "state"
    options_probe = _options(tmp_path, {"x": _token(urls[0])}, {"SCREEPS_TOKEN": FULL_TOKEN})
    with open_session(options_probe) as probe:
        fingerprint = probe.auth("x").fingerprint()
    paths = {url: Ledger.path_for(state_dir, url, fingerprint)[0] for url in urls}
    first_url, second_url = sorted(urls, key=lambda u: str(paths[u]))
    # Named so that the names sort the other way round from the paths; "a" is asked for.
    servers = {"a": _token(second_url), "z": _token(first_url)}
    waited: list[tuple[str, bool]] = []

    def waiting(what: str) -> contextlib.AbstractContextManager[Callable[[str], None]]:
        # Whether the asked server's ledger was locked already while the other's lock is waited for.
        waited.append((what, paths[second_url].with_name(paths[second_url].name + ".lock").exists()))
        return contextlib.nullcontext(lambda _line: None)

    options = _options(tmp_path, servers, {"SCREEPS_TOKEN": FULL_TOKEN}, waiting=waiting)
    with _held(state_dir, first_url, fingerprint), open_session(options) as session:
        ledger = session.ledger("a")  # the other's lock is busy: waited for first, its error kept for when asked
        assert ledger.path == paths[second_url]
        with pytest.raises(LedgerBusyError) as info:
            session.ledger("z")
        assert str(paths[first_url]) in info.value.message
    assert len(waited) == 2  # once while all were opened, once more when "z" itself was asked for
    what, second_locked_then = waited[0]
    assert str(paths[first_url]) in what
    assert not second_locked_then


def test_close_releases_every_lock_even_of_ledgers_never_asked_for(tmp_path: Path) -> None:
    urls = [_closed_url(), _closed_url() + "/season"]
    servers = {"a": _token(urls[0]), "b": _token(urls[1])}
    options = _options(tmp_path, servers, {"SCREEPS_TOKEN": FULL_TOKEN})
    with open_session(options) as session:
        session.ledger("a")
        fingerprint = session.auth("b").fingerprint()
        with pytest.raises(LedgerBusyError):  # "b" was locked along with "a"
            Ledger.open(tmp_path / "state", urls[1], fingerprint, clock=ManualClock(0), lock_wait=0)
    for url in urls:
        Ledger.open(tmp_path / "state", url, fingerprint, clock=ManualClock(0), lock_wait=0).close()


class _Sent(Unobserved):
    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.sent: list[str] = []

    def record_sent(self, endpoint: str) -> None:
        super().record_sent(endpoint)
        self.sent.append(endpoint)


def test_a_side_client_tells_its_own_observer_not_the_ledger(tmp_path: Path, standin: StandIn) -> None:
    options = _options(tmp_path, {"local": _token(standin.url)}, {"SCREEPS_TOKEN": FULL_TOKEN}, clock=standin.clock)
    observer = _Sent(standin.clock)
    with open_session(options) as session:
        with session.side_client("local", observer) as side:
            assert "default" in [b.name for b in side.list_branches()]  # the session's credentials and URL
        assert observer.sent == [LIST]
        assert not session.has_client("local")  # a side client is not the server's client
    assert standin.count(LIST) == 1
    assert not (tmp_path / "state").exists()  # nothing reached a ledger


def test_the_token_is_asked_once_per_run(tmp_path: Path, standin: StandIn) -> None:
    options = _options(tmp_path, {"local": _token(standin.url)}, {"SCREEPS_TOKEN": FULL_TOKEN}, clock=standin.clock)
    with open_session(options) as session:
        assert session.learn_unlimited("local") is False
        assert session.learn_unlimited("local") is False
    assert standin.count(QUERY) == 1
    with open_session(options) as session:
        session.mark_queried("local")  # asked already in this run (by a read sent ahead)
        assert session.learn_unlimited("local") is False
    assert standin.count(QUERY) == 1
    with open_session(replace(options, refresh="never")) as session:
        assert session.learn_unlimited("local") is False
    assert standin.count(QUERY) == 1  # --refresh=never: no request at all


def test_an_unlimited_token_is_learnt_from_the_token_query(tmp_path: Path, standin: StandIn) -> None:
    until = standin.grant_unlimited(FULL_TOKEN)
    options = _options(tmp_path, {"local": _token(standin.url)}, {"SCREEPS_TOKEN": FULL_TOKEN}, clock=standin.clock)
    with open_session(options) as session:
        assert session.learn_unlimited("local") is True
        facts = session.budget_facts("local")
        assert facts.unlimited_until is not None
        assert facts.unlimited_until >= until - 1
        assert facts.limited
    with open_session(options) as session:  # saved in the ledger at close: the next run knows it without asking
        assert session.unlimited_now("local")
    assert standin.count(QUERY) == 1
