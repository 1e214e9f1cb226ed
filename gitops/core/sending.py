"""When a request may go: the wait under the global limit, and whether the branch list may go before the HTTP
client exists. Pure: the times are given.

The client paces each request of a paced login (a persistent token: only those are counted by the server) under the
global limit of 120 a minute, unless the token is unlimited now (the no-rate-limit page's two hours). The head start
writes the branch list on the early connection before any client is made, where nothing can pace it: so only when
the client's own first request would be exactly that one and would go at once (:func:`sends_list_ahead`).
"""

from __future__ import annotations

from collections.abc import Sequence

from gitops.core.endpoints import pacing_wait


def global_wait(*, paced: bool, unlimited_until: float | None, sent: Sequence[float], now: float) -> float:
    """Seconds the next request waits under the global limit: 0 for a login that is not paced, or a token
    unlimited now; else :func:`gitops.core.endpoints.pacing_wait` of the requests ``sent`` in the last minute."""
    if not paced or (unlimited_until is not None and unlimited_until > now):
        return 0.0
    return pacing_wait(list(sent), now)


def sends_list_ahead(*, token: bool, unlimited_until: float | None, sent: Sequence[float], now: float) -> bool:
    """Whether a server's branch list may be written on its early connection now: only with a persistent token (a
    sign-in would go first otherwise), and only when the client would send it without a wait
    (:func:`global_wait` of a token's requests: ``sent`` are those of the last minute, the ones sent ahead to
    other servers under the same ledger included)."""
    return token and global_wait(paced=True, unlimited_until=unlimited_until, sent=sent, now=now) <= 0
