"""Budget assessment: what a plan needs of each limit against what is known to remain."""

from __future__ import annotations

from gitops.core.budget import WindowState, assess, shortfall_message, utc
from gitops.core.endpoints import GLOBAL_KEY, Limit

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


# --- every kind of row -----------------------------------------------------------------------------------------

UPLOAD = "POST /api/user/code"
CLONE = "POST /api/user/clone-branch"
ACTIVATE = "POST /api/user/set-active-branch"


def test_rows_say_where_their_figures_come_from() -> None:
    windows = {
        UPLOAD: window(UPLOAD, 240, 10),
        ACTIVATE: WindowState(ACTIVATE, 240, 7, NOW + 60, NOW - 5, "counted"),
    }
    rows = assess("s", {UPLOAD: 1, ACTIVATE: 1, CLONE: 1}, windows, reserve={}, unlimited_until=None, now=NOW)
    assert [(r.endpoint, r.needed, r.remaining, r.reset, r.source) for r in rows] == [
        (UPLOAD, 1, 10, NOW + 3600, "headers"),
        (ACTIVATE, 1, 7, NOW + 60, "counted"),
        (GLOBAL_KEY, 3, None, None, "unknown"),  # the clone has no limit of its own: only the global row counts it
    ]
    assert [(r.limit, r.period) for r in rows] == [(240, 86400), (240, 86400), (120, 60)]


def test_nothing_needed_makes_no_rows() -> None:
    assert assess("s", {}, {}, reserve={}, unlimited_until=None, now=NOW) == []


def test_exactly_what_remains_fits_and_one_more_does_not() -> None:
    windows = {UPLOAD: window(UPLOAD, 240, 3)}
    assert assess("s", {UPLOAD: 3}, windows, reserve={}, unlimited_until=None, now=NOW)[0].fits
    assert not assess("s", {UPLOAD: 4}, windows, reserve={}, unlimited_until=None, now=NOW)[0].fits


def test_a_window_reported_below_zero_counts_as_empty() -> None:
    rows = assess("s", {UPLOAD: 1}, {UPLOAD: window(UPLOAD, 240, -3)}, reserve={}, unlimited_until=None, now=NOW)
    assert (rows[0].remaining, rows[0].fits) == (0, False)


def test_the_reserve_is_kept_back_from_the_full_limit_when_nothing_is_known() -> None:
    rows = assess("s", {UPLOAD: 200}, {}, reserve={UPLOAD: 40}, unlimited_until=None, now=NOW)
    assert (rows[0].reserve, rows[0].fits) == (40, True)
    rows = assess("s", {UPLOAD: 201}, {}, reserve={UPLOAD: 40}, unlimited_until=None, now=NOW)
    assert not rows[0].fits


def test_a_reserve_above_what_remains_refuses_even_one_request() -> None:
    rows = assess(
        "s", {UPLOAD: 1}, {UPLOAD: window(UPLOAD, 240, 2)}, reserve={UPLOAD: 5}, unlimited_until=None, now=NOW
    )
    assert not rows[0].fits


def test_the_global_limit_never_refuses_even_when_exhausted() -> None:
    windows = {GLOBAL_KEY: window(GLOBAL_KEY, 120, 0, reset_in=30)}
    rows = assess("s", {UPLOAD: 1}, windows, reserve={GLOBAL_KEY: 200}, unlimited_until=None, now=NOW)
    glob = rows[-1]
    assert (glob.endpoint, glob.remaining, glob.source, glob.fits) == (GLOBAL_KEY, 0, "headers", True)


def test_unlimited_rows_show_when_the_period_ends() -> None:
    rows = assess("s", {UPLOAD: 500}, {}, reserve={UPLOAD: 10}, unlimited_until=NOW + 600, now=NOW)
    assert [(r.source, r.reset, r.fits) for r in rows] == [("unlimited", NOW + 600, True)] * 2
    # An unlimited period that ends now is over.
    ended = assess("s", {UPLOAD: 1}, {}, reserve={}, unlimited_until=NOW, now=NOW)
    assert ended[0].source == "unknown"


def test_shortfall_with_a_reserve_and_without_a_known_window() -> None:
    (row, _) = assess("s", {UPLOAD: 240}, {}, reserve={UPLOAD: 20}, unlimited_until=None, now=NOW)
    assert shortfall_message(row) == (
        "server 's': the plan needs 240 x POST /api/user/code but 240 of 240 per day remain (20 reserved for you); "
        "the window is 240 per day"
    )


def test_utc_and_limit_wording() -> None:
    assert utc(NOW) == "2027-01-15 08:00 UTC"
    assert Limit("x", 5, 30).describe() == "5 per 30 s"
    assert Limit("x", 60, 3600).describe() == "60 per hour"
