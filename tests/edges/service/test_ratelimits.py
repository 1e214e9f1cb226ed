"""``gitops/edges/service/ratelimits.py``: pacing under the global limit and a 429's wait, on the injected clock
(``ManualClock``: a wait moves it), with real ``httpx.Response`` answers."""

from __future__ import annotations

import httpx
import pytest

from gitops.edges.clock import ManualClock
from gitops.edges.service.observer import Unobserved
from gitops.edges.service.ratelimits import MAX_RATE_LIMIT_RETRIES, RateLimits
from gitops.errors import RateLimitedError

UPLOAD = "POST /api/user/code"


def _limits(clock: ManualClock, *, max_wait: float = 60.0, paced: bool = True) -> tuple[RateLimits, list[str]]:
    waits: list[str] = []
    limits = RateLimits(
        server_name="local",
        clock=clock,
        observer=Unobserved(clock),
        max_wait=max_wait,
        on_wait=lambda seconds, endpoint: waits.append(f"{seconds:g} {endpoint}"),
        debug=lambda line: None,
        paced=paced,
    )
    return limits, waits


def _observer(limits: RateLimits) -> Unobserved:
    observer = limits._observer
    assert isinstance(observer, Unobserved)
    return observer


def test_under_the_global_limit_nothing_waits() -> None:
    clock = ManualClock()
    limits, waits = _limits(clock)
    for _ in range(10):
        _observer(limits).record_sent("GET /api/x")
    limits.pace()
    assert (waits, clock.slept) == ([], [])


def test_at_the_global_limit_the_next_request_waits_for_the_window() -> None:
    clock = ManualClock()
    limits, waits = _limits(clock)
    for _ in range(120):
        _observer(limits).record_sent("GET /api/x")
        clock.advance(0.1)
    limits.pace()
    assert len(clock.slept) == 1
    assert 0 < clock.slept[0] <= 60
    assert waits[0].endswith(" global")


def test_a_client_that_is_not_paced_never_waits() -> None:
    clock = ManualClock()
    limits, waits = _limits(clock, paced=False)
    for _ in range(500):
        _observer(limits).record_sent("GET /api/x")
    limits.pace()
    assert (waits, clock.slept) == ([], [])


def test_a_429_within_max_wait_is_waited_out_for_its_body_s_time() -> None:
    clock = ManualClock()
    limits, waits = _limits(clock)
    limits.waited_out(UPLOAD, httpx.Response(429, text="Rate limit exceeded, retry after 1500ms"), 0)
    assert clock.slept == [1.5]
    assert waits == [f"1.5 {UPLOAD}"]


def test_a_429_longer_than_max_wait_is_refused_with_its_reset() -> None:
    clock = ManualClock(start=1_800_000_000.0)
    limits, _ = _limits(clock, max_wait=60)
    answer = httpx.Response(429, headers={"X-RateLimit-Limit": "240", "X-RateLimit-Reset": str(1_800_003_600)})
    with pytest.raises(RateLimitedError) as refused:
        limits.waited_out(UPLOAD, answer, 0)
    assert str(refused.value).startswith(
        f"server 'local' refused {UPLOAD}: rate limited by the limit of 240 per day for {UPLOAD}; it resets at "
        "2027-01-15 09:00:00 UTC (a wait of 60 min is longer than --max-wait (60 s))."
    )
    assert clock.slept == []


def test_a_429_that_keeps_coming_is_refused_after_the_retries() -> None:
    limits, _ = _limits(ManualClock())
    with pytest.raises(RateLimitedError, match=f"still refused after waiting {MAX_RATE_LIMIT_RETRIES} times"):
        limits.waited_out("GET /api/x", httpx.Response(429, headers={"Retry-After": "1"}), MAX_RATE_LIMIT_RETRIES)


def test_a_wait_of_more_than_a_day_is_not_slept_on() -> None:
    limits, _ = _limits(ManualClock(), max_wait=10**9)
    with pytest.raises(RateLimitedError, match="the server asked for a wait of more than a day"):
        limits.waited_out("GET /api/x", httpx.Response(429, text="retry after " + "9" * 400 + "ms"), 0)


def test_a_429_without_headers_is_recorded_as_its_window_spent() -> None:
    clock = ManualClock(start=1000.0)
    limits, _ = _limits(clock)
    headers = limits.answer_headers(UPLOAD, httpx.Response(429, headers={"Retry-After": "7200"}))
    assert headers == {"X-RateLimit-Limit": "240", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "8200"}
    ok = httpx.Response(200, headers={"X-RateLimit-Limit": "240"})
    assert limits.answer_headers(UPLOAD, ok) is ok.headers
