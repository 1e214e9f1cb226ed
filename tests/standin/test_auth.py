"""Authentication and scopes: tokens in the header or the query, HTTP Basic on the code endpoint, 401 and 403."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gitops.standin.testing import (
    ALICE,
    ALICE_EMAIL,
    ALICE_PASSWORD,
    BOB_TOKEN,
    FULL_TOKEN,
    RESTRICTED_TOKEN,
    StandIn,
    running_standin,
)
from tests.standin.helpers import JSON_TYPE, client, send

#: The example of the issue, as written.
ISSUE_ACCOUNTS = """\
users:
  - username: alice
    email: alice@example.com
    password: s3cret
    tokens:
      - value: 0123456789abcdef0123456789abcdef
        full: true
      - value: fedcba9876543210fedcba9876543210
        endpoints: ["GET /api/user/code", "POST /api/user/code"]
        websockets: ["console"]
        memory_segments: [0, 1]
"""
FULL = "0123456789abcdef0123456789abcdef"
SCOPED = "fedcba9876543210fedcba9876543210"


@pytest.fixture(scope="module")
def issue_standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIn]:
    """One stand-in for the read-mostly checks of this module, from the issue's accounts file."""
    folder = tmp_path_factory.mktemp("issue")
    accounts = folder / "accounts.yaml"
    accounts.write_text(ISSUE_ACCOUNTS, encoding="utf-8")
    with running_standin(accounts, folder / "standin.sqlite3") as standin:
        standin.grant_unlimited(FULL)
        standin.grant_unlimited(SCOPED)
        yield standin


@pytest.fixture
def http(issue_standin: StandIn) -> Iterator[httpx.Client]:
    with client(issue_standin) as c:
        yield c


def _basic(login: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode()}


def test_token_in_header_or_query_is_the_same(http: httpx.Client) -> None:
    by_header = http.get("/api/user/branches", headers={"X-Token": FULL})
    by_query = http.get("/api/user/branches", params={"_token": FULL})
    assert by_header.status_code == by_query.status_code == 200
    assert by_header.json() == by_query.json()
    assert by_header.json()["ok"] == 1


@pytest.mark.parametrize("login", ["alice@example.com", "alice", "ALICE@Example.com"])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_basic_authentication_on_the_code_endpoint(http: httpx.Client, login: str, method: str) -> None:
    if method == "GET":
        answer = http.get("/api/user/code", headers=_basic(login, "s3cret"))
    else:
        answer = http.post(
            "/api/user/code", headers=_basic(login, "s3cret"), json={"branch": "default", "modules": {"main": "b"}}
        )
    assert answer.status_code == 200
    assert answer.json()["ok"] == 1


@pytest.mark.parametrize(
    ("name", "headers", "params"),
    [
        ("nothing", {}, {}),
        ("unknown token in header", {"X-Token": "ffffffffffffffffffffffffffffffff"}, {}),
        ("unknown token in query", {}, {"_token": "ffffffffffffffffffffffffffffffff"}),
        ("empty token", {"X-Token": ""}, {}),
        ("wrong password", _basic("alice@example.com", "wrong"), {}),
        ("unknown user", _basic("mallory@example.com", "s3cret"), {}),
        ("password case", _basic("alice", "S3CRET"), {}),
        ("no colon", {"Authorization": "Basic " + base64.b64encode(b"alice").decode()}, {}),
        ("not base64", {"Authorization": "Basic %%%"}, {}),
        ("bearer", {"Authorization": "Bearer " + FULL}, {}),
        # A token wins over HTTP Basic: a wrong token is not rescued by a right password.
        ("wrong token and right password", {"X-Token": "f" * 32, **_basic("alice", "s3cret")}, {}),
    ],
)
def test_missing_or_wrong_credentials_get_401(
    http: httpx.Client, name: str, headers: dict[str, str], params: dict[str, str]
) -> None:
    answer = http.get("/api/user/code", headers=headers, params=params)
    assert answer.status_code == 401, name
    assert answer.headers["content-type"] == JSON_TYPE
    assert answer.json() == {"error": "unauthorized"}


@pytest.mark.parametrize("endpoint", ["GET /api/user/memory", "POST /api/user/console", "GET /api/game/market/stats"])
def test_basic_authentication_only_on_the_code_endpoint(http: httpx.Client, endpoint: str) -> None:
    answer = send(http, endpoint, headers=_basic("alice", "s3cret"))
    assert answer.status_code == 401
    assert answer.json() == {"error": "unauthorized"}
    assert http.get("/api/user/branches", headers=_basic("alice", "s3cret")).status_code == 401


def test_restricted_token_reaches_its_endpoints_only(http: httpx.Client) -> None:
    assert http.get("/api/user/code", params={"_token": SCOPED}).json()["ok"] == 1
    posted = http.post(
        "/api/user/code", headers={"X-Token": SCOPED}, json={"branch": "default", "modules": {"main": "s"}}
    )
    assert posted.json()["ok"] == 1
    denied = http.get("/api/user/branches", headers={"X-Token": SCOPED})
    assert denied.status_code == 403
    assert denied.headers["content-type"] == JSON_TYPE
    assert denied.json() == {
        "error": "token is not allowed to use GET /api/user/branches",
        "endpoint": "GET /api/user/branches",
    }
    for endpoint in ("POST /api/user/set-active-branch", "GET /api/user/memory", "POST /api/user/console"):
        answer = send(http, endpoint, headers={"X-Token": SCOPED})
        assert answer.status_code == 403
        assert answer.json()["endpoint"] == endpoint
        assert endpoint in answer.json()["error"]


def test_restricted_token_reaches_its_memory_segments_only(http: httpx.Client) -> None:
    token = {"X-Token": SCOPED}
    assert http.post("/api/user/memory-segment", headers=token, json={"segment": 1, "data": "one"}).json() == {"ok": 1}
    assert http.get("/api/user/memory-segment", headers=token, params={"segment": "1"}).json() == {
        "ok": 1,
        "data": "one",
    }
    for segment in (2, 99):
        read = http.get("/api/user/memory-segment", headers=token, params={"segment": str(segment)})
        assert read.status_code == 403
        assert read.json() == {"error": f"token is not allowed to use memory segment {segment}", "segment": segment}
        write = http.post("/api/user/memory-segment", headers=token, json={"segment": segment, "data": "x"})
        assert write.status_code == 403
        assert write.json()["segment"] == segment
    # A number that is no segment at all is the handler's error, as for a full token.
    assert http.get("/api/user/memory-segment", headers=token, params={"segment": "100"}).json() == {
        "error": "invalid segment ID"
    }


def test_restricted_token_with_a_segment_endpoint_reaches_every_segment(tmp_path: Path) -> None:
    accounts = {
        "users": [
            {
                "username": "carol",
                "tokens": [{"value": "carol-token-1234", "endpoints": ["GET /api/user/memory-segment"]}],
            }
        ]
    }
    with running_standin(accounts, tmp_path / "s.sqlite3") as standin, client(standin, "carol-token-1234") as c:
        assert c.get("/api/user/memory-segment", params={"segment": "42"}).json() == {"ok": 1}
        denied = c.post("/api/user/memory-segment", json={"segment": 42, "data": "x"})
        assert denied.status_code == 403
        assert denied.json()["endpoint"] == "POST /api/user/memory-segment"


def test_query_token_reports_the_scope_with_websockets(http: httpx.Client) -> None:
    scoped = http.get("/api/auth/query-token", params={"token": SCOPED})
    assert scoped.status_code == 200
    body = scoped.json()
    assert body["ok"] == 1
    assert body["user"] == "alice"
    assert body["token"] == {
        "full": False,
        "endpoints": ["GET /api/user/code", "POST /api/user/code"],
        "websockets": ["console"],
        "memorySegments": [0, 1],
    }
    full = http.get("/api/auth/query-token", params={"token": FULL}).json()
    assert full["token"] == {"full": True, "endpoints": [], "websockets": [], "memorySegments": []}
    # The token value itself is never echoed.
    assert FULL not in http.get("/api/auth/query-token", params={"token": FULL}).text


def test_auth_me_names_the_user(standin: StandIn) -> None:
    with client(standin, FULL_TOKEN) as c:
        me = c.get("/api/auth/me").json()
    assert me["ok"] == 1
    assert me["username"] == ALICE
    assert me["email"] == ALICE_EMAIL
    assert "password" not in me
    assert ALICE_PASSWORD not in str(me)


def test_tokens_of_different_users_see_their_own_code(standin: StandIn) -> None:
    with client(standin, FULL_TOKEN) as alice, client(standin, BOB_TOKEN) as bob:
        alice.post("/api/user/code", json={"branch": "default", "modules": {"main": "alice's"}})
        assert bob.get("/api/user/code").json()["modules"] == {"main": ""}
        assert alice.get("/api/user/code").json()["modules"] == {"main": "alice's"}
    with client(standin, RESTRICTED_TOKEN) as restricted:
        assert restricted.get("/api/user/code").json()["modules"] == {"main": "alice's"}


def test_requests_are_counted_per_endpoint_and_user(standin: StandIn) -> None:
    with client(standin) as c:
        c.get("/api/user/code", headers={"X-Token": FULL_TOKEN})
        c.get("/api/user/code", auth=(ALICE, ALICE_PASSWORD))
        c.get("/api/user/code/", headers={"X-Token": BOB_TOKEN})
        c.get("/api/user/code")  # 401, still received
    assert standin.count("GET /api/user/code") == 4
    assert standin.count("get /api/user/code", ALICE) == 2
    assert standin.count("GET /api/user/code", "bob") == 1
    assert standin.count("POST /api/user/code") == 0
