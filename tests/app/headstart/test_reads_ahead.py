"""Reads asked ahead (issue 23, ``gitops.app.headstart.sidereads``): on a first contact with the official server, the
token query and the download of each branch go out at the same time as the branch list, each from a thread and a
connection of its own; what they teach reaches the ledger as if they had been asked one after another.

The official server is the stand-in in its official shape (a branch list without modules), reached over real HTTP
on loopback through a transport that sends ``https://screeps.com`` to it: the one fake, at the httpx transport seam,
because a test may not reach the real host name. The head start runs in front of it (the branch list sent ahead
through it, as on a connection opened early).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gitops.cli import run
from gitops.standin.testing import StandIn
from tests.project import Project

LIST = "GET /api/user/branches"
DOWNLOAD = "GET /api/user/code"
QUERY = "GET /api/auth/query-token"


class ToStandIn(httpx.BaseTransport):
    """Sends every request for ``https://screeps.com`` to the stand-in over loopback, and notes which thread sent
    which request (method and path)."""

    def __init__(self, standin: StandIn) -> None:
        self._real = httpx.HTTPTransport()
        self._target = httpx.URL(standin.url)
        self.sent: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.sent.append((f"{request.method} {request.url.path}", threading.current_thread().name))
        request.url = request.url.copy_with(scheme=self._target.scheme, host=self._target.host, port=self._target.port)
        return self._real.handle_request(request)

    def close(self) -> None:
        self._real.close()

    def threads_of(self, endpoint: str) -> list[str]:
        return [thread for sent, thread in self.sent if sent == endpoint]


@pytest.fixture
def official(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    standin.list_without_modules()
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write(
        {"src/main.js": "module.exports.loop = () => require('util').x;\n", "src/util.js": "module.exports.x = 1;\n"}
    )
    p.manifest([{"branch": "default", "root": "src"}])
    data = yaml.safe_load((p.root / "gitops.yaml").read_text(encoding="utf-8"))
    data["servers"]["local"]["url"] = "https://screeps.com"
    (p.root / "gitops.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    p.commit()
    return p


def _gitops(project: Project, transport: ToStandIn, *args: str) -> tuple[int, str, str]:
    project.capsys.readouterr()
    code = run(
        [*args, "-m", str(project.root / "gitops.yaml"), "--state-dir", str(project.state_dir)],
        clock=project.service.clock,
        transport=transport,
    )
    captured = project.capsys.readouterr()
    return code, captured.out, captured.err


def _plan(project: Project, transport: ToStandIn) -> dict[str, Any]:
    code, out, err = _gitops(project, transport, "plan", "--json")
    assert code == 2, err
    return dict(json.loads(out))


def test_a_first_contact_asks_the_token_and_the_branch_beside_the_branch_list(
    official: Project, standin: StandIn
) -> None:
    with ToStandIn(standin) as transport:
        plan = _plan(official, transport)
    assert transport.threads_of(LIST) == ["MainThread"]
    (download,) = transport.threads_of(DOWNLOAD)
    (query,) = transport.threads_of(QUERY)
    assert download.startswith("gitops-ahead")
    assert query.startswith("gitops-ahead")
    (branch,) = plan["branches"]
    assert branch["action"] == "update"  # the download ahead was used: 'default' holds the stand-in's own module
    assert standin.count(DOWNLOAD) == 1
    assert standin.count(QUERY) == 1

    # The ledger learnt what the reads ahead taught: the second plan asks nothing ahead, downloads nothing (the
    # branch and its listed time are known) and does not ask the token again (its scope is known for a day).
    with ToStandIn(standin) as transport:
        again = _plan(official, transport)
    assert [sent for sent, _ in transport.sent] == [LIST]
    assert again["branches"][0]["action"] == "update"
    assert standin.count(DOWNLOAD) == 1
    assert standin.count(QUERY) == 1


def test_the_reads_ahead_are_in_the_ledger_s_count(official: Project, standin: StandIn) -> None:
    with ToStandIn(standin) as transport:
        _plan(official, transport)
    (ledger,) = official.state_dir.glob("ledger/*/*.json")
    text = ledger.read_text(encoding="utf-8")
    assert DOWNLOAD in text
    assert QUERY in text
    with ToStandIn(standin) as transport:
        code, _out, err = _gitops(official, transport, "apply", "--yes")
    assert code == 0, err
    assert standin.count(DOWNLOAD) == 1  # applying trusted what the plans learnt


def test_a_branch_the_list_shows_missing_still_costs_its_download_ahead(official: Project, standin: StandIn) -> None:
    data = yaml.safe_load((official.root / "gitops.yaml").read_text(encoding="utf-8"))
    data["branches"][0]["branch"] = "fresh"
    (official.root / "gitops.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    official.commit("a new branch")
    with ToStandIn(standin) as transport:
        plan = _plan(official, transport)
    assert plan["branches"][0]["action"] == "create"
    assert standin.count(DOWNLOAD) == 1  # sent ahead before the list said the branch does not exist


def test_a_failed_download_ahead_fails_the_plan_as_the_download_in_order_would(
    official: Project, standin: StandIn
) -> None:
    class FailDownloads(ToStandIn):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.path == "/api/user/code":
                return httpx.Response(502, text="bad gateway", request=request)
            return super().handle_request(request)

    with FailDownloads(standin) as transport:
        code, out, err = _gitops(official, transport, "plan")
    assert code == 1, out + err
    assert "answered 502" in err
    assert "GET /api/user/code" in err
    assert "Traceback" not in err


def test_the_head_start_runs_through_a_test_transport(official: Project, standin: StandIn) -> None:
    """A test's transport does not switch the head start off (issue 47): the branch list is sent ahead through it,
    read without the client, and counted once, as on a connection opened early."""
    with ToStandIn(standin) as transport:
        _plan(official, transport)
    with ToStandIn(standin) as transport:
        code, _out, err = _gitops(official, transport, "plan", "--json", "--debug")
    assert code == 2, err
    assert "server 'local': the branch list is sent ahead on the early connection" in err
    assert f"server 'local': {LIST} -> 200" in err
    assert "read on the early connection" in err
    assert [sent for sent, _ in transport.sent] == [LIST]
    assert standin.count(LIST) == 2  # one a plan
