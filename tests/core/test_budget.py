"""Budget assessment: what a plan needs of each limit against what is known to remain."""

from __future__ import annotations

from gitops.core.budget import WindowState, assess, shortfall_message
from gitops.core.limits import GLOBAL_KEY

NOW = 1_800_000_000.0


def window(endpoint: str, limit: int, remaining: int, reset_in: float = 3600) -> WindowState:
    return WindowState(endpoint, limit, remaining, NOW + reset_in, NOW, "headers")


def test_unknown_windows_assume_the_full_limit() -> None:
    rows = assess("s", {"POST /api/user/code": 3}, {}, reserve={}, unlimited_until=None, now=NOW)
    assert [(r.endpoint, r.needed, r.remaining, r.fits, r.source) for r in rows] == [
        ("POST /api/user/code", 3, None, True, "unknown"),
        (GLOBAL_KEY, 3, None, True, "unknown"),
    ]


def test_a_plan_over_what_remains_does_not_fit_and_says_when_it_resets() -> None:
    rows = assess(
        "official",
        {"POST /api/user/code": 2},
        {"POST /api/user/code": window("POST /api/user/code", 240, 1)},
        reserve={},
        unlimited_until=None,
        now=NOW,
    )
    assert not rows[0].fits
    assert shortfall_message(rows[0]) == (
        "server 'official': the plan needs 2 x POST /api/user/code but 1 of 240 per day remain; "
        "it resets at 2027-01-15 09:00 UTC"
    )


def test_reserve_is_kept_back() -> None:
    windows = {"POST /api/user/code": window("POST /api/user/code", 240, 21)}
    fits = assess(
        "s", {"POST /api/user/code": 1}, windows, reserve={"POST /api/user/code": 20}, unlimited_until=None, now=NOW
    )
    refused = assess(
        "s", {"POST /api/user/code": 2}, windows, reserve={"POST /api/user/code": 20}, unlimited_until=None, now=NOW
    )
    assert fits[0].fits
    assert not refused[0].fits


def test_a_window_past_its_reset_is_full_again() -> None:
    windows = {"POST /api/user/code": window("POST /api/user/code", 240, 0, reset_in=-1)}
    rows = assess("s", {"POST /api/user/code": 1}, windows, reserve={}, unlimited_until=None, now=NOW)
    assert rows[0].fits
    assert rows[0].remaining is None


def test_unlimited_period_fits_everything_until_it_ends() -> None:
    windows = {"POST /api/user/code": window("POST /api/user/code", 240, 0)}
    during = assess("s", {"POST /api/user/code": 5}, windows, reserve={}, unlimited_until=NOW + 60, now=NOW)
    after = assess("s", {"POST /api/user/code": 5}, windows, reserve={}, unlimited_until=NOW - 1, now=NOW)
    assert during[0].fits
    assert during[0].source == "unlimited"
    assert not after[0].fits


def test_global_limit_is_shown_but_paced_not_refused() -> None:
    rows = assess("s", {"POST /api/user/clone-branch": 200}, {}, reserve={}, unlimited_until=None, now=NOW)
    assert [(r.endpoint, r.needed, r.fits) for r in rows] == [(GLOBAL_KEY, 200, True)]
