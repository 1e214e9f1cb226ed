"""Rate-limit budget: what a plan needs of each limit, what is known to remain, and whether it fits.

Pure data and pure functions; the ledger (``gitops.ledger``) supplies the known windows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class WindowState:
    """What is known of one rate-limit window of a token.

    ``endpoint`` is ``"GET /api/user/code"``-style or ``gitops.limits.GLOBAL_KEY``; ``reset`` is the UTC epoch second
    at which the window's count resets; ``source`` says whether the figure came from ``X-RateLimit-*`` headers or
    from counting the requests this tool sent.
    """

    endpoint: str
    limit: int
    remaining: int
    reset: float
    learnt_at: float
    source: Literal["headers", "counted"]
