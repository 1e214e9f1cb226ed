"""What the token query's answer says (gitops.core.tokens): pure, no server."""

from __future__ import annotations

import pytest

from gitops.core.tokens import TokenInfo, token_info

NOW = 1_800_000_000.0


def test_a_full_token_with_a_duration_left_unlimited() -> None:
    info = token_info({"ok": 1, "full": True, "unlimitedSeconds": 600}, NOW)
    assert info == TokenInfo(
        full=True,
        endpoints=(),
        websockets=(),
        memory_segments=(),
        unlimited_until=NOW + 600,
        unlimited_seconds=600.0,
    )


def test_a_restricted_token_lists_its_endpoints_and_segments() -> None:
    data = {
        "token": {
            "endpoints": {"GET /api/user/code": True, "POST /api/user/code": True, "GET /api/user/branches": False},
            "websockets": ["console"],
            "memorySegments": [1, 2, "x"],
        }
    }
    info = token_info(data, NOW)
    assert info.full is False
    assert info.endpoints == ("GET /api/user/code", "POST /api/user/code")
    assert info.websockets == ("console",)
    assert info.memory_segments == (1, 2)
    assert info.unlimited_until is None
    assert info.unlimited_seconds == 0.0


def test_an_end_time_is_read_in_seconds_or_milliseconds() -> None:
    assert token_info({"unlimitedUntil": NOW + 60}, NOW).unlimited_until == NOW + 60
    assert token_info({"noRateLimitUntil": (NOW + 60) * 1000}, NOW).unlimited_until == NOW + 60


def test_a_duration_wins_over_an_end_time() -> None:
    assert token_info({"unlimitedSeconds": 30, "unlimitedUntil": NOW + 600}, NOW).unlimited_until == NOW + 30


@pytest.mark.parametrize("value", [0, -5, True, float("nan"), float("inf"), 10**400, "600"])
def test_what_is_no_time_leaves_the_token_limited(value: object) -> None:
    assert token_info({"unlimitedSeconds": value}, NOW).unlimited_until is None


def test_an_end_time_in_the_past_is_limited_and_more_than_a_day_is_cut_to_a_day() -> None:
    assert token_info({"unlimitedUntil": NOW - 1}, NOW).unlimited_until is None
    assert token_info({"unlimitedSeconds": 10 * 86400}, NOW).unlimited_until == NOW + 86400
