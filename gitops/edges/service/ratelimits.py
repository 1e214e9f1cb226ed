"""The rate limits of a game server, as one client meets them: pacing, 429s, and the ``X-RateLimit-*`` headers.

Requests are paced under the global limit of 120 per minute (only a token's requests are counted), from what the
observer remembers of the requests sent, this run's and earlier runs'. A 429 is waited out when its wait is short
(``max_wait``, a few times at most) and refused with the reset time otherwise; a 429 without rate-limit headers is
recorded as a spent window until its wait is over, so that the budget knows it. What a header means (which window,
which numbers) is :mod:`gitops.core.endpoints`'s; this module decides what the client does about it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import NoReturn, Protocol

from gitops.core.endpoints import (
    DAY,
    GLOBAL_KEY,
    GLOBAL_LIMIT,
    MINUTE,
    Limit,
    header_number,
    limit_for,
    reset_time,
    window_key,
)
from gitops.core.sending import global_wait
from gitops.edges.clock import Clock
from gitops.edges.service.observer import Observer
from gitops.errors import RateLimitedError

__all__ = ["LONGEST_WAIT", "MAX_RATE_LIMIT_RETRIES", "Answer", "RateLimits"]


class Answer(Protocol):
    """What these rules read of an answer: an ``httpx.Response`` is one, and so is the branch list's answer read on
    the early connection (:class:`gitops.edges.early.PlainAnswer`). No httpx here: the head start uses these rules
    before it is imported."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def text(self) -> str: ...


#: How many times one request waits out a 429 before giving up.
MAX_RATE_LIMIT_RETRIES = 3
#: The longest wait a 429 can mean: the longest window is a day. A longer one is never waited, whatever --max-wait.
LONGEST_WAIT = float(DAY)

_RETRY_AFTER = re.compile(r"retry after\s+(\d+(?:\.\d+)?)\s*ms", re.IGNORECASE)


class RateLimits:
    """The limits of one client's requests. ``paced``: its requests count against the global limit (a token's);
    ``on_wait(seconds, endpoint)`` is told before each wait; ``debug`` takes a log line."""

    def __init__(
        self,
        *,
        server_name: str,
        clock: Clock,
        observer: Observer,
        max_wait: float,
        on_wait: Callable[[float, str], None] | None,
        debug: Callable[[str], None],
        paced: bool,
    ) -> None:
        self._server_name = server_name
        self._clock = clock
        self._observer = observer
        self._max_wait = max_wait
        self._on_wait = on_wait
        self._debug = debug
        self._paced = paced

    def pace(self) -> None:
        """Wait, if needed, so that the next request stays under the global limit (120 per minute)."""
        if not self._paced:
            return
        times = self._observer.sent_times(GLOBAL_KEY, MINUTE)
        wait = global_wait(
            paced=True, unlimited_until=self._observer.unlimited_until, sent=times, now=self._clock.now()
        )
        if wait > 0:
            self._debug(f"pacing: {len(times)} requests in the last minute; waiting {wait:.1f} s")
            self.wait(wait, GLOBAL_KEY)

    def wait(self, seconds: float, endpoint: str) -> None:
        """Wait ``seconds`` for ``endpoint``'s window (``"global"``: the global limit's), telling ``on_wait``."""
        if self._on_wait is not None:
            self._on_wait(seconds, endpoint)
        self._clock.sleep(seconds)

    def waited_out(self, endpoint: str, response: Answer, waits: int) -> None:
        """A 429 that the ``waits`` before it did not avoid: wait it out, or raise :class:`RateLimitedError` when
        its wait is too long or it came too often."""
        wait = self._retry_after(response)
        if wait <= min(self._max_wait, LONGEST_WAIT) and waits < MAX_RATE_LIMIT_RETRIES:
            self.wait(wait, endpoint)
            return
        self._rate_limited(endpoint, response, wait, waits)

    def answer_headers(self, endpoint: str, response: Answer) -> Mapping[str, str]:
        """The rate-limit headers the observer is told of an answer: a 429 without any gets its window recorded as
        spent until its wait is over (at most a day)."""
        if response.status_code != 429 or "x-ratelimit-limit" in response.headers:
            return response.headers
        wait = min(self._retry_after(response), LONGEST_WAIT)
        return {
            "X-RateLimit-Limit": str(_limit_of_429(endpoint, response, wait).count),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(int(self._clock.now() + wait + 0.999)),
        }

    def _retry_after(self, response: Answer) -> float:
        """Seconds a 429 asks to wait: the body's ``retry after <ms>ms``, else the reset header, else
        ``Retry-After``, else a minute. Never negative or NaN; ``inf`` when the body's number is too large for a
        float (the caller treats anything over :data:`LONGEST_WAIT` as "more than a day")."""
        match = _RETRY_AFTER.search(response.text)
        if match:
            return float(match.group(1)) / 1000.0  # digits only: finite, or inf when there are hundreds of them
        now = self._clock.now()
        reset = header_number(response.headers.get("X-RateLimit-Reset"))
        if reset is not None:
            return max(0.0, reset_time(reset, now) - now)
        after = header_number(response.headers.get("Retry-After"))
        if after is not None:
            return max(0.0, after)
        return float(MINUTE)

    def _rate_limited(self, endpoint: str, response: Answer, wait: float, waits: int) -> NoReturn:
        limit = _limit_of_429(endpoint, response, wait)
        which = (
            f"the global limit of {limit.describe()}"
            if limit is GLOBAL_LIMIT
            else f"the limit of {limit.describe()} for {endpoint}"
        )
        shown = min(wait, LONGEST_WAIT)
        reset_at = datetime.fromtimestamp(self._clock.now() + shown, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if waits >= MAX_RATE_LIMIT_RETRIES:
            why = f"still refused after waiting {waits} times"
        elif wait > LONGEST_WAIT:
            # No window is longer than a day: a longer wait is the server's nonsense, and no reason to sleep on.
            reset_at += " or later"
            why = (
                f"the server asked for a wait of more than a day, longer than --max-wait ({_duration(self._max_wait)})"
            )
        else:
            why = f"a wait of {_duration(wait)} is longer than --max-wait ({_duration(self._max_wait)})"
        raise RateLimitedError(
            f"server '{self._server_name}' refused {endpoint}: rate limited by {which}; it resets at {reset_at} "
            f"({why}).",
            hint="Wait until then and run again, or lift every limit of the token for two hours on the "
            "no-rate-limit page: `gitops unlock` prints its link.",
        )


def _limit_of_429(endpoint: str, response: Answer, wait: float) -> Limit:
    """Which limit a 429 is about: the ``X-RateLimit-Limit`` header says; without it, a wait over a minute cannot
    be the global window (it resets every minute), so it is the endpoint's own."""
    own = limit_for(endpoint)
    header = header_number(response.headers.get("X-RateLimit-Limit"))
    if header is not None and header >= 0:
        key = window_key(endpoint, int(header))
    else:
        key = endpoint if own is not None and wait > MINUTE else GLOBAL_KEY
    return own if key == endpoint and own is not None else GLOBAL_LIMIT


def _duration(seconds: float) -> str:
    if seconds > LONGEST_WAIT:
        return "more than a day"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
