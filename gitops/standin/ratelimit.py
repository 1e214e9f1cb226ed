"""Per-token rate limits, read from ``gitops.core.endpoints`` (the one table), and the two-hour unlimited grants.

Each (token, limit) has a fixed window: it opens at the first counted request and resets ``period`` seconds later
(to the millisecond, so a 429's "retry after" never exceeds the window); ``X-RateLimit-Reset`` is that moment rounded
up to a whole epoch second, so waiting until it is always enough. A request counts against the global limit and
its endpoint's limit; it is refused with 429 (and counts against neither) when either is used up. A token inside its
unlimited period is not counted and never refused. Windows and grants are written through to the store, so a restart
neither forgives nor forgets spent requests.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from gitops.core.endpoints import GLOBAL_LIMIT, UNLIMITED_PERIOD, Limit, limit_for
from gitops.edges.clock import Clock
from gitops.standin.store import Store


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome for one request: allowed or not, and the window its ``X-RateLimit-*`` headers report."""

    allowed: bool
    limit: Limit
    remaining: int
    reset_ms: int
    retry_ms: int = 0

    @property
    def reset(self) -> int:
        """The epoch second ``X-RateLimit-Reset`` reports: the window's end, rounded up."""
        return -(-self.reset_ms // 1000)

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (b"x-ratelimit-limit", str(self.limit.count).encode()),
            (b"x-ratelimit-remaining", str(self.remaining).encode()),
            (b"x-ratelimit-reset", str(self.reset).encode()),
        ]


class RateLimiter:
    """Counts token requests in fixed windows and keeps the unlimited grants."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[tuple[str, str], tuple[int, int]] = store.windows()
        self._grants: dict[str, float] = store.grants()

    # -- unlimited grants -----------------------------------------------------------------------------------

    def unlimited_until(self, token: str) -> float | None:
        """When the token's unlimited period ends (epoch seconds), or ``None`` when it is limited now."""
        until = self._grants.get(token)
        if until is None or until <= self._clock.now():
            return None
        return until

    def grant(self, token: str) -> float:
        """Lift every limit of the token for two hours from now; returns when that ends."""
        until = self._clock.now() + UNLIMITED_PERIOD
        with self._lock:
            self._store.save_grant(token, until)
            self._grants[token] = until
        return until

    # -- windows --------------------------------------------------------------------------------------------

    def check(self, token: str, endpoint: str) -> Verdict:
        """Count one request of ``token`` to ``endpoint``, or refuse it if a window is used up (then count nothing)."""
        return self._decide(token, endpoint, count=True)

    def peek(self, token: str, endpoint: str) -> Verdict:
        """The headers a request would carry, without counting it (for answers such as 403)."""
        return self._decide(token, endpoint, count=False)

    def window(self, token: str, key: str) -> tuple[int, int] | None:
        """The stored (count, reset in epoch ms) of one window, or ``None`` if it never opened or has reset."""
        state = self._windows.get((token, key))
        if state is None or self._clock.now() * 1000 >= state[1]:
            return None
        return state

    def _decide(self, token: str, endpoint: str, *, count: bool) -> Verdict:
        now = self._clock.now() * 1000  # milliseconds
        own = limit_for(endpoint)
        limits = [own, GLOBAL_LIMIT] if own is not None else [GLOBAL_LIMIT]
        with self._lock:
            current: list[tuple[Limit, int, int]] = []
            for limit in limits:
                state = self._windows.get((token, limit.endpoint))
                if state is None or now >= state[1]:
                    # floor: the window never ends later than period after the request that opened it.
                    state = (0, math.floor(now) + limit.period * 1000)
                current.append((limit, state[0], state[1]))
            exceeded = [(limit, reset) for limit, used, reset in current if used >= limit.count]
            if exceeded:
                # The caller must wait for every exhausted window, so report the one that frees up last.
                limit, reset = max(exceeded, key=lambda item: item[1])
                retry_ms = max(1, math.ceil(reset - now))
                return Verdict(False, limit, 0, reset, retry_ms)
            if count:
                updated = {limit.endpoint: (used + 1, reset) for limit, used, reset in current}
                self._store.save_windows(token, updated)
                for key, state in updated.items():
                    self._windows[(token, key)] = state
                current = [(limit, used + 1, reset) for limit, used, reset in current]
            limit, used, reset = current[0]
            return Verdict(True, limit, limit.count - used, reset)
