"""The rate-limit window arithmetic over the ledger's records: what counts, what remains, when a window frees."""

from __future__ import annotations

from dataclasses import dataclass

from gitops.core.budget import (
    WindowState,
    headers_outlived,
    latest_headers,
    sent_after,
    sent_kept_for,
    sent_since,
    sent_to,
    window_state,
    window_states,
)
from gitops.core.endpoints import DAY, DOWNLOAD, ENDPOINT_LIMITS, GLOBAL_KEY, GLOBAL_LIMIT, HOUR, MINUTE, UPLOAD

NOW = 1_800_000_000.0


@dataclass
class Seen:
    limit: int
    remaining: int
    reset: float
    learnt_at: float
    seq: int


def test_the_global_window_counts_every_endpoint_and_an_endpoint_only_its_own() -> None:
    sent = {UPLOAD: [(NOW - 5, 1)], DOWNLOAD: [(NOW - 3, 2), (NOW - 1, 3)]}
    assert sorted(sent_to(sent, GLOBAL_KEY)) == [(NOW - 5, 1), (NOW - 3, 2), (NOW - 1, 3)]
    assert sent_to(sent, DOWNLOAD) == [(NOW - 3, 2), (NOW - 1, 3)]
    assert sent_to(sent, "GET /api/user/memory") == []


def test_requests_since_a_moment_are_those_after_it_in_order() -> None:
    sent = [(NOW - 1, 3), (NOW - 90, 1), (NOW - 60, 2)]
    assert sent_since(sent, NOW - 60) == [NOW - 1]
    assert sent_since(sent, NOW - 61) == [NOW - 60, NOW - 1]
    assert sent_after(sent, 1) == 2
    assert sent_after(sent, 3) == 0


def test_without_headers_a_window_is_counted_and_frees_a_period_after_its_oldest_request() -> None:
    limit = ENDPOINT_LIMITS[UPLOAD]
    sent = [(NOW - DAY - 1, 1), (NOW - 100, 2), (NOW - 10, 3)]
    state = window_state(UPLOAD, limit, None, sent, NOW)
    assert state == WindowState(UPLOAD, limit.count, limit.count - 2, NOW - 100 + DAY, NOW, "counted")


def test_an_empty_counted_window_resets_a_period_from_now() -> None:
    assert window_state(GLOBAL_KEY, GLOBAL_LIMIT, None, [], NOW) == WindowState(
        GLOBAL_KEY, GLOBAL_LIMIT.count, GLOBAL_LIMIT.count, NOW + MINUTE, NOW, "counted"
    )


def test_live_headers_are_believed_less_the_requests_sent_since_they_arrived() -> None:
    seen = Seen(limit=60, remaining=10, reset=NOW + 600, learnt_at=NOW - 30, seq=2)
    sent = [(NOW - 40, 1), (NOW - 30, 2), (NOW - 20, 3), (NOW - 10, 4)]
    state = window_state(DOWNLOAD, ENDPOINT_LIMITS[DOWNLOAD], seen, sent, NOW)
    assert state == WindowState(DOWNLOAD, 60, 8, NOW + 600, NOW - 30, "headers")
    spent = Seen(limit=60, remaining=1, reset=NOW + 600, learnt_at=NOW - 30, seq=2)
    assert window_state(DOWNLOAD, ENDPOINT_LIMITS[DOWNLOAD], spent, sent, NOW).remaining == 0


def test_after_the_headers_window_reset_only_the_requests_since_the_reset_count() -> None:
    seen = Seen(limit=60, remaining=0, reset=NOW - 50, learnt_at=NOW - 100, seq=2)
    sent = [(NOW - 60, 2), (NOW - 40, 3)]
    state = window_state(DOWNLOAD, ENDPOINT_LIMITS[DOWNLOAD], seen, sent, NOW)
    assert state == WindowState(DOWNLOAD, 60, 59, NOW - 40 + HOUR, NOW, "counted")


def test_the_latest_headers_are_the_last_learnt_then_the_last_request() -> None:
    early = Seen(60, 5, NOW + 1, NOW - 10, 9)
    late = Seen(60, 4, NOW + 1, NOW - 5, 1)
    later_request = Seen(60, 3, NOW + 1, NOW - 5, 2)
    assert latest_headers([early, late]) is late
    assert latest_headers([later_request, late]) is later_request
    assert latest_headers([]) is None


def test_every_window_is_told_and_headers_go_to_the_window_their_limit_names() -> None:
    headers = {DOWNLOAD: Seen(GLOBAL_LIMIT.count, 100, NOW + 30, NOW - 1, 0)}
    states = window_states(headers, {DOWNLOAD: [(NOW - 2, 1)]}, NOW)
    assert list(states) == [GLOBAL_KEY, *ENDPOINT_LIMITS]
    assert states[GLOBAL_KEY] == WindowState(GLOBAL_KEY, GLOBAL_LIMIT.count, 99, NOW + 30, NOW - 1, "headers")
    assert states[DOWNLOAD].source == "counted"
    assert states[DOWNLOAD].remaining == ENDPOINT_LIMITS[DOWNLOAD].count - 1


def test_a_request_is_kept_as_long_as_its_longest_window() -> None:
    assert sent_kept_for(UPLOAD) == DAY
    assert sent_kept_for(DOWNLOAD) == HOUR
    assert sent_kept_for("GET /api/user/name") == MINUTE


def test_headers_are_outlived_once_both_their_window_and_the_longest_period_are_past() -> None:
    assert headers_outlived(Seen(60, 0, NOW - MINUTE - 1, NOW - DAY - 1, 0), NOW)
    assert not headers_outlived(Seen(60, 0, NOW - MINUTE - 1, NOW - 10, 0), NOW)
    assert not headers_outlived(Seen(60, 0, NOW, NOW - DAY - 1, 0), NOW)
