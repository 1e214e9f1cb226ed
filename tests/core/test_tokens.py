"""What a token string and the token query's answer say (gitops.core.tokens): pure, no server."""

from __future__ import annotations

import hashlib

import pytest

from gitops.core.tokens import TokenInfo, account_fingerprint, header_safe, token_info, value_problem

NOW = 1_800_000_000.0


def test_a_header_value_is_printable_ascii_without_spaces() -> None:
    assert header_safe("abc-DEF_0123~!")
    assert not header_safe("")
    assert not header_safe("with space")
    assert not header_safe("tab\there")
    assert not header_safe("é")


@pytest.mark.parametrize(
    ("value", "header", "problem"),
    [
        ("0123abcd", True, None),
        ("line\nbreak", True, "contains a line break (carriage return or newline)"),
        ("windows\r", False, "contains a line break (carriage return or newline)"),
        ("bell\x07", False, "contains a control character"),
        ("broken\udcff", False, "contains bytes that are not valid UTF-8"),
        ("two words", True, "contains whitespace"),
        ("two words", False, None),
        ("naïve", True, "contains a non-ASCII character (only letters, digits and ASCII punctuation can be sent)"),
        ("naïve", False, None),
    ],
)
def test_what_is_wrong_with_a_credential_value(value: str, header: bool, problem: str | None) -> None:
    assert value_problem(value, header=header) == problem


def test_an_account_fingerprint_is_of_the_lowercased_url_and_the_user_name() -> None:
    expected = hashlib.sha256(b"screeps-gitops\0http://127.0.0.1:21025\0alice").hexdigest()[:16]
    assert account_fingerprint("HTTP://127.0.0.1:21025/", "alice") == expected
    assert account_fingerprint("http://127.0.0.1:21025", "Alice") != expected


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
