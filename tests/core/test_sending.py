"""When a request may go (``gitops.core.sending``): the client's wait under the global limit, and whether the
branch list may be written on the early connection before any client exists."""

from __future__ import annotations

from gitops.core.endpoints import GLOBAL_LIMIT, MINUTE
from gitops.core.sending import global_wait, sends_list_ahead

NOW = 1_000_000.0
#: A full minute: the global limit's count of requests, the oldest 10 s ago.
FULL = [NOW - 10 + i * 0.01 for i in range(GLOBAL_LIMIT.count)]


def test_no_wait_below_the_limit() -> None:
    assert global_wait(paced=True, unlimited_until=None, sent=FULL[1:], now=NOW) == 0.0


def test_a_full_minute_waits_for_its_oldest_request_to_leave_it() -> None:
    assert global_wait(paced=True, unlimited_until=None, sent=FULL, now=NOW) == MINUTE - 10


def test_an_unpaced_login_or_an_unlimited_token_never_waits() -> None:
    assert global_wait(paced=False, unlimited_until=None, sent=FULL, now=NOW) == 0.0
    assert global_wait(paced=True, unlimited_until=NOW + 1, sent=FULL, now=NOW) == 0.0
    # unlimited until now is no longer unlimited
    assert global_wait(paced=True, unlimited_until=NOW, sent=FULL, now=NOW) > 0


def test_the_list_goes_ahead_only_with_a_token_that_would_not_wait() -> None:
    assert sends_list_ahead(token=True, unlimited_until=None, sent=[], now=NOW)
    assert not sends_list_ahead(token=False, unlimited_until=None, sent=[], now=NOW)  # a sign-in goes first
    assert not sends_list_ahead(token=True, unlimited_until=None, sent=FULL, now=NOW)  # the client would pace it
    assert sends_list_ahead(token=True, unlimited_until=NOW + 60, sent=FULL, now=NOW)
