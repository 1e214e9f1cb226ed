"""Rate limits: every limit of the table and the global one, per token, with their headers, 429s and resets."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
import pytest

from gitops.core.endpoints import ENDPOINT_LIMITS, GLOBAL_LIMIT, UNLIMITED_PERIOD, limit_for
from gitops.standin.testing import (
    ALICE_EMAIL,
    ALICE_PASSWORD,
    BOB_TOKEN,
    DEMO_ACCOUNTS,
    FULL_TOKEN,
    RESTRICTED_TOKEN,
    StandIn,
    running_standin,
)
from tests.standin.helpers import SAMPLE_REQUESTS, client, has_window, send, window


def test_every_limited_endpoint_has_a_sample_request() -> None:
    assert set(SAMPLE_REQUESTS) == set(ENDPOINT_LIMITS)


def _exhaust(standin: StandIn, http: httpx.Client, endpoint: str) -> int:
    """Spend the whole endpoint limit of ``endpoint``, moving the clock on a minute whenever the global window
    is used up; checks the headers of every answer. Returns the endpoint window's reset."""
    limit = ENDPOINT_LIMITS[endpoint]
    opened = standin.clock.now()
    expected_reset = math.ceil(opened + limit.period)
    in_global_window = 0
    for i in range(limit.count):
        if in_global_window == GLOBAL_LIMIT.count:
            standin.clock.advance(GLOBAL_LIMIT.period)
            in_global_window = 0
        response = send(http, endpoint)
        in_global_window += 1
        assert response.status_code == 200, (i, response.text)
        assert "error" not in response.json(), response.text
        assert window(response) == (limit.count, limit.count - i - 1, expected_reset)
    return expected_reset


@pytest.mark.parametrize("endpoint", sorted(ENDPOINT_LIMITS))
def test_endpoint_limit_is_exhausted_answers_429_and_resets(standin: StandIn, endpoint: str) -> None:
    limit = ENDPOINT_LIMITS[endpoint]
    with client(standin, FULL_TOKEN) as http:
        reset = _exhaust(standin, http, endpoint)
        standin.clock.advance(GLOBAL_LIMIT.period)  # a fresh global window: only the endpoint's is used up

        refused = send(http, endpoint)
        assert refused.status_code == 429
        wait_ms = math.ceil((reset - standin.clock.now()) * 1000)
        assert refused.text == f"Rate limit exceeded, retry after {wait_ms}ms"
        assert refused.headers["content-type"] == "text/plain; charset=utf-8"
        assert window(refused) == (limit.count, 0, reset)

        # The refused request counted nowhere: the global window still has all its requests.
        other = http.get("/api/user/branches")
        assert other.status_code == 200
        assert window(other) == (GLOBAL_LIMIT.count, GLOBAL_LIMIT.count - 1, math.ceil(standin.clock.now() + 60))

        # One second before the reset it is still refused; at the reset a new window opens.
        standin.clock.advance(reset - standin.clock.now() - 1)
        assert send(http, endpoint).status_code == 429
        standin.clock.advance(1)
        again = send(http, endpoint)
        assert again.status_code == 200
        assert window(again) == (limit.count, limit.count - 1, reset + limit.period)

    # The limits are per token: another token of the same user was never limited.
    with client(standin, BOB_TOKEN) as bob:
        assert send(bob, endpoint).status_code == 200


def test_global_limit_is_exhausted_answers_429_and_resets(standin: StandIn) -> None:
    start = standin.clock.now()
    with client(standin, FULL_TOKEN) as http:
        for i in range(GLOBAL_LIMIT.count):
            response = http.get("/api/user/branches")
            assert response.status_code == 200
            # No limit of its own: the headers report the global window.
            assert window(response) == (120, 119 - i, math.ceil(start + 60))
        standin.clock.advance(20.5)
        refused = http.get("/api/user/branches")
        assert refused.status_code == 429
        assert refused.text == "Rate limit exceeded, retry after 39500ms"
        assert window(refused) == (120, 0, math.ceil(start + 60))
        # Every endpoint is refused now, with the global window in the headers.
        code = http.get("/api/user/code")
        assert code.status_code == 429
        assert window(code) == (120, 0, math.ceil(start + 60))
        standin.clock.advance(39.5)
        allowed = http.get("/api/user/code")
        assert allowed.status_code == 200
        # The endpoint's own window opened only now (the refused request did not count against it).
        assert window(allowed) == (60, 59, math.ceil(standin.clock.now() + 3600))


def test_each_request_counts_against_both_windows(standin: StandIn) -> None:
    with client(standin, FULL_TOKEN) as http:
        for _ in range(60):
            assert http.get("/api/user/code").status_code == 200
        for _ in range(60):
            branches = http.get("/api/user/branches")
        assert window(branches) == (120, 0, math.ceil(standin.clock.now() + 60))
        # Both windows are used up: the answer reports the one that frees up last (the endpoint's hour).
        refused = http.get("/api/user/code")
        assert refused.status_code == 429
        assert window(refused) == (60, 0, math.ceil(standin.clock.now() + 3600))
        standin.clock.advance(60)
        assert http.get("/api/user/branches").status_code == 200
        still = http.get("/api/user/code")
        assert still.status_code == 429
        assert window(still)[0] == 60


def test_query_parameter_token_shares_the_windows_of_the_header_token(standin: StandIn) -> None:
    with client(standin) as http:
        first = http.get("/api/user/code", headers={"X-Token": FULL_TOKEN})
        second = http.get("/api/user/code", params={"_token": FULL_TOKEN})
    assert window(first)[1] == 59
    assert window(second)[1] == 58


def test_restricted_token_has_its_own_windows_and_headers_on_403(standin: StandIn) -> None:
    with client(standin, RESTRICTED_TOKEN) as http:
        assert window(http.get("/api/user/code"))[1] == 59
        denied = http.get("/api/user/branches")
        assert denied.status_code == 403
        # The 403 carries the window it would have counted against, but did not count.
        assert window(denied)[:2] == (120, 119)
        assert window(http.get("/api/user/code"))[1] == 58


def test_basic_authentication_is_never_limited(standin: StandIn) -> None:
    with client(standin) as http:
        for _ in range(limit_for("GET /api/user/code").count + 5):  # type: ignore[union-attr]
            response = http.get("/api/user/code", auth=(ALICE_EMAIL, ALICE_PASSWORD))
            assert response.status_code == 200
            assert not has_window(response)
        # Nor did those requests use up the token's windows.
        assert window(http.get("/api/user/code", headers={"X-Token": FULL_TOKEN}))[1] == 59


def test_unauthenticated_and_401_answers_carry_no_limit_headers(standin: StandIn) -> None:
    with client(standin) as http:
        assert not has_window(http.get("/api/auth/query-token", params={"token": FULL_TOKEN}))
        unknown = http.get("/api/user/code", headers={"X-Token": "not-a-known-token"})
        assert unknown.status_code == 401
        assert not has_window(unknown)


def test_unlimited_token_is_neither_counted_nor_refused_for_two_hours(standin: StandIn) -> None:
    with client(standin, FULL_TOKEN) as http:
        for _ in range(60):
            http.get("/api/user/code")
        assert http.get("/api/user/code").status_code == 429
        granted = http.post("/api/auth/noratelimit", json={"token": FULL_TOKEN})
        assert granted.json() == {"ok": 1, "unlimitedUntil": int((standin.clock.now() + UNLIMITED_PERIOD) * 1000)}
        for _ in range(300):
            response = http.get("/api/user/code")
            assert response.status_code == 200
            assert not has_window(response)  # nothing is counted, so there is no window to report
        standin.clock.advance(UNLIMITED_PERIOD - 1)
        assert http.get("/api/user/code").status_code == 200
        standin.clock.advance(1)
        # Limited again. The hour-long window of GET /api/user/code reset during the two hours.
        after = http.get("/api/user/code")
        assert after.status_code == 200
        assert window(after) == (60, 59, math.ceil(standin.clock.now() + 3600))


def test_windows_and_grants_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "standin.sqlite3"
    with running_standin(DEMO_ACCOUNTS, data) as standin, client(standin, FULL_TOKEN) as http:
        for _ in range(60):
            http.get("/api/user/code")
        refused = http.get("/api/user/code")
        assert refused.status_code == 429
        http.post("/api/auth/noratelimit", json={"token": BOB_TOKEN})
        clock = standin.clock
    with running_standin(DEMO_ACCOUNTS, data, clock) as standin, client(standin, FULL_TOKEN) as http:
        again = http.get("/api/user/code")
        assert again.status_code == 429
        assert window(again) == window(refused)
        until = http.get("/api/auth/query-token", params={"token": BOB_TOKEN}).json()["unlimitedSeconds"]
        assert until == UNLIMITED_PERIOD
