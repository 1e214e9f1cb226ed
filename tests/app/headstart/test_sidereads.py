"""Reads sent ahead on side connections (``gitops.app.headstart.sidereads``), driven directly through a session: what
a first contact asks ahead (the token query; on the official server the downloads of the branches the ledger does
not know, within the budget), each in a thread and a side client of its own; what they teach reaches the ledger when
their answer is taken; a download that failed raises where it is taken, a read nobody took is logged and dropped.

The official server is the stand-in in its official shape (a branch list without modules) over real HTTP on
loopback, reached through a transport that sends ``https://screeps.com`` to it (the one fake, at the httpx transport
seam: ``ToStandIn``). Whole runs with reads ahead are ``tests/app/headstart/test_reads_ahead.py``'s."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from gitops.app.headstart.sidereads import send_side_reads, server_branches, wanted
from gitops.app.options import Options
from gitops.app.session import open_session
from gitops.config.manifest import load_manifest
from gitops.core.early import MOST
from gitops.errors import BudgetError, ServiceError
from gitops.standin.testing import ALICE, ALICE_PASSWORD, FULL_TOKEN, StandIn
from tests.app.headstart.test_reads_ahead import ToStandIn
from tests.factories import write_manifest

OFFICIAL = "https://screeps.com"
DOWNLOAD = "GET /api/user/code"
QUERY = "GET /api/auth/query-token"


class FailingDownloads(ToStandIn):
    """:class:`ToStandIn` whose downloads are answered 502 (a fault the stand-in does not make on its own)."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/user/code":
            return httpx.Response(502, text="bad gateway", request=request)
        return super().handle_request(request)


def _options(
    tmp_path: Path, standin: StandIn, transport: httpx.BaseTransport | None, *, url: str = OFFICIAL, **extra: Any
) -> Options:
    branches = extra.pop("branches", [{"branch": "default", "root": "src"}])
    server = extra.pop("server", {"url": url, "token_env": "SCREEPS_TOKEN"})
    manifest = write_manifest(tmp_path / "bot", servers={"local": server}, branches=branches)
    env = {"SCREEPS_TOKEN": FULL_TOKEN, "U": ALICE, "P": ALICE_PASSWORD}
    return Options(
        manifest=manifest, env=env, state_dir=tmp_path / "state", clock=standin.clock, transport=transport, **extra
    )


@pytest.fixture
def official(standin: StandIn) -> Iterator[ToStandIn]:
    standin.list_without_modules()
    with ToStandIn(standin) as transport:
        yield transport


def _no_budget_check(server: str, count: int) -> None:
    pass


def _ledger_text(tmp_path: Path) -> str:
    (path,) = (tmp_path / "state" / "ledger").glob("*/*.json")
    return path.read_text(encoding="utf-8")


# --- what is asked ahead ------------------------------------------------------------------------------------------


def test_a_first_contact_with_the_official_server_wants_the_token_and_the_unknown_branches(
    tmp_path: Path, standin: StandIn
) -> None:
    branches = [{"branch": name, "root": "src"} for name in ("b", "a", "c", "d")]
    with open_session(_options(tmp_path, standin, None, branches=branches)) as session:
        assert wanted(session, "local") == (True, ["a", "b", "c", "d"][: MOST - 1])


def test_elsewhere_the_list_is_the_download_and_only_the_token_is_wanted(tmp_path: Path, standin: StandIn) -> None:
    with open_session(_options(tmp_path, standin, None, url=standin.url)) as session:
        assert wanted(session, "local") == (True, [])


def test_nothing_is_wanted_for_a_sign_in_or_with_refresh_never(tmp_path: Path, standin: StandIn) -> None:
    password = {"url": OFFICIAL, "username_env": "U", "password_env": "P"}
    with open_session(_options(tmp_path / "a", standin, None, server=password)) as session:
        assert wanted(session, "local") == (False, [])
    with open_session(replace(_options(tmp_path / "b", standin, None), refresh="never")) as session:
        assert wanted(session, "local") == (False, [])
        assert send_side_reads(session, "local", _no_budget_check, None, {}) is None
    assert not (tmp_path / "b" / "state").exists()  # nothing asked of the ledger, nothing sent


def test_server_branches_are_the_manifests_with_their_standbys(tmp_path: Path, standin: StandIn) -> None:
    branches = [
        {
            "branch": "main",
            "root": "src",
            "activate": ["world"],
            "verify": {"rollback": "standby", "standby": "main-b"},
        },
        {"branch": "sim", "root": "src"},
    ]
    options = _options(tmp_path, standin, None, branches=branches)
    assert server_branches(load_manifest(options.manifest), "local") == ["main", "main-b", "sim"]


# --- sent, taken, taught ------------------------------------------------------------------------------------------


def test_the_reads_go_out_each_on_its_own_thread_and_teach_the_ledger_when_taken(
    tmp_path: Path, standin: StandIn, official: ToStandIn
) -> None:
    with open_session(_options(tmp_path, standin, official)) as session:
        reads = send_side_reads(session, "local", _no_budget_check, None, {})
        assert reads is not None
        taken = reads.download("default")
        assert taken is not None
        code, at = taken
        assert code is not None
        assert code.names() == ["main"]
        assert at == standin.clock.now()
        assert reads.download("default") is None  # once
        reads.finish()
        ledger = session.ledger("local")
        assert ledger.knows_branch("default")
        assert ledger.scope() is not None
        assert session.learn_unlimited("local") is False  # the token was asked in this run: not asked again
    (download,) = official.threads_of(DOWNLOAD)
    (query,) = official.threads_of(QUERY)
    assert download.startswith("gitops-ahead")
    assert query.startswith("gitops-ahead")
    assert standin.count(QUERY) == 1
    text = _ledger_text(tmp_path)  # counted in the ledger, as if asked in order
    assert DOWNLOAD in text
    assert QUERY in text


def test_downloads_that_do_not_fit_the_budget_are_not_sent_ahead(
    tmp_path: Path, standin: StandIn, official: ToStandIn
) -> None:
    asked: list[tuple[str, int]] = []

    def refuse(server: str, count: int) -> None:
        asked.append((server, count))
        raise BudgetError("no downloads left")

    with open_session(_options(tmp_path, standin, official)) as session:
        reads = send_side_reads(session, "local", refuse, None, {})
        assert reads is not None  # the token query still goes
        assert reads.download("default") is None
        reads.finish()
    assert asked == [("local", 1)]
    assert official.threads_of(DOWNLOAD) == []
    assert len(official.threads_of(QUERY)) == 1


def test_a_failed_download_raises_where_it_is_taken(tmp_path: Path, standin: StandIn) -> None:
    standin.list_without_modules()
    with FailingDownloads(standin) as failing, open_session(_options(tmp_path, standin, failing)) as s:
        reads = send_side_reads(s, "local", _no_budget_check, None, {})
        assert reads is not None
        with pytest.raises(ServiceError) as info:
            reads.download("default")
        assert "502" in info.value.message
        reads.finish()


def test_a_read_nobody_took_is_taken_at_the_end_and_its_failure_only_logged(tmp_path: Path, standin: StandIn) -> None:
    standin.list_without_modules()
    logged: list[str] = []
    with FailingDownloads(standin) as failing:
        options = _options(tmp_path, standin, failing, log=logged.append)
        with open_session(options) as session:
            reads = send_side_reads(session, "local", _no_budget_check, None, {})
            assert reads is not None
            reads.finish()  # no error: nobody needed the download's answer
            assert session.ledger("local").scope() is not None  # the query's answer reached the ledger
    (line,) = [line for line in logged if "sent ahead" in line]
    assert line.startswith("a read sent ahead to server 'local' failed: ")
    assert "502" in line


def test_the_compression_probe_sent_ahead_is_recorded_when_taken(
    tmp_path: Path, standin: StandIn, official: ToStandIn
) -> None:
    probed: dict[str, bool | None] = {}
    with open_session(_options(tmp_path, standin, official)) as session:
        reads = send_side_reads(session, "local", _no_budget_check, None, probed)
        assert reads is not None
        reads.send_probe()
        reads.finish()
        learnt = session.ledger("local").compression()
        assert learnt is not None
        assert probed == {"local": learnt}
