"""The unlimited state: the token query, the grant behind the page's Proceed button, and the end of two hours."""

from __future__ import annotations

import httpx

from gitops.core.endpoints import UNLIMITED_PERIOD
from gitops.standin.testing import FULL_TOKEN, RESTRICTED_TOKEN, StandIn
from tests.standin.helpers import client


def _query(http: httpx.Client, token: str) -> dict[str, object]:
    answer = http.get("/api/auth/query-token", params={"token": token})
    assert answer.status_code == 200
    result: dict[str, object] = answer.json()
    return result


def test_query_token_before_during_and_after_the_unlimited_period(standin: StandIn) -> None:
    with client(standin) as http:
        before = _query(http, RESTRICTED_TOKEN)
        assert before["unlimitedUntil"] is None
        assert before["unlimitedSeconds"] == 0
        assert before["token"] == {
            "full": False,
            "endpoints": ["GET /api/user/code", "POST /api/user/code"],
            "websockets": [],
            "memorySegments": [],
        }
        granted = http.post("/api/auth/noratelimit", json={"token": RESTRICTED_TOKEN})
        until_ms = int((standin.clock.now() + UNLIMITED_PERIOD) * 1000)
        assert granted.json() == {"ok": 1, "unlimitedUntil": until_ms}
        during = _query(http, RESTRICTED_TOKEN)
        assert during["unlimitedUntil"] == until_ms
        assert during["unlimitedSeconds"] == UNLIMITED_PERIOD
        standin.clock.advance(3600)
        assert _query(http, RESTRICTED_TOKEN)["unlimitedSeconds"] == UNLIMITED_PERIOD - 3600
        assert _query(http, FULL_TOKEN)["unlimitedSeconds"] == 0  # a grant is for one token
        standin.clock.advance(3600)
        after = _query(http, RESTRICTED_TOKEN)
        assert after["unlimitedUntil"] is None
        assert after["unlimitedSeconds"] == 0


def test_a_second_grant_starts_two_new_hours(standin: StandIn) -> None:
    with client(standin) as http:
        http.post("/api/auth/noratelimit", json={"token": FULL_TOKEN})
        standin.clock.advance(5000)
        http.post("/api/auth/noratelimit", json={"token": FULL_TOKEN})
        assert _query(http, FULL_TOKEN)["unlimitedSeconds"] == UNLIMITED_PERIOD


def test_unknown_or_missing_tokens(standin: StandIn) -> None:
    with client(standin) as http:
        assert _query(http, "f" * 32) == {"error": "token not found"}
        assert http.get("/api/auth/query-token").json() == {"error": "invalid params: give the token as 'token'"}
        unknown = http.post("/api/auth/noratelimit", json={"token": "f" * 32})
        assert unknown.status_code == 200
        assert unknown.json() == {"error": "token not found"}
        assert http.post("/api/auth/noratelimit", json={}).json()["error"].startswith("invalid params")


def test_the_page_is_served_at_a(standin: StandIn) -> None:
    with client(standin) as http:
        for path in ("/a/", "/a", "/a/index.html"):
            page = http.get(path)
            assert page.status_code == 200
            assert page.headers["content-type"] == "text/html; charset=utf-8"
            assert "x-frame-options" not in page.headers  # it must work inside a frame
            assert ">Proceed</button>" in page.text
            assert "serviceTokenSuccess" in page.text
