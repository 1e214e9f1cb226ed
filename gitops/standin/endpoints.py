"""Every endpoint the stand-in answers, keyed ``"METHOD /path"`` as in the limit table (``gitops.core.endpoints``).

The accounts file names endpoints with these keys; a restricted token reaches only the keys it lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Auth = Literal["none", "token", "token-or-basic"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One route: its key and how a caller must authenticate."""

    key: str
    auth: Auth


_ENDPOINTS = (
    Endpoint("GET /api/version", "none"),
    Endpoint("GET /api/auth/me", "token"),
    Endpoint("GET /api/auth/query-token", "none"),
    # Stand-in only: what the "Proceed" button of the no-rate-limit page calls.
    Endpoint("POST /api/auth/noratelimit", "none"),
    Endpoint("GET /a", "none"),
    Endpoint("GET /a/index.html", "none"),
    Endpoint("GET /api/user/code", "token-or-basic"),
    Endpoint("POST /api/user/code", "token-or-basic"),
    Endpoint("GET /api/user/branches", "token"),
    Endpoint("POST /api/user/clone-branch", "token"),
    Endpoint("POST /api/user/set-active-branch", "token"),
    Endpoint("POST /api/user/delete-branch", "token"),
    Endpoint("GET /api/user/memory", "token"),
    Endpoint("POST /api/user/memory", "token"),
    Endpoint("GET /api/user/memory-segment", "token"),
    Endpoint("POST /api/user/memory-segment", "token"),
    Endpoint("POST /api/user/console", "token"),
    Endpoint("GET /api/game/room-terrain", "token"),
    Endpoint("POST /api/game/map-stats", "token"),
    Endpoint("GET /api/game/market/orders-index", "token"),
    Endpoint("GET /api/game/market/orders", "token"),
    Endpoint("GET /api/game/market/my-orders", "token"),
    Endpoint("GET /api/game/market/stats", "token"),
    Endpoint("GET /api/game/user/money-history", "token"),
)

ENDPOINTS: dict[str, Endpoint] = {e.key: e for e in _ENDPOINTS}

#: Other paths of an endpoint: the private server (and so node-screeps-api and python screepsapi) has money history
#: at ``/api/user/money-history``, the interface document at ``/api/game/user/money-history``. Both are one endpoint:
#: one handler, one rate limit, one scope, one request count.
ALIASES: dict[str, str] = {"GET /api/user/money-history": "GET /api/game/user/money-history"}


def canonical_key(key: str) -> str:
    """The endpoint key a request to ``key`` (``"GET /api/user/money-history"``) is handled and counted as."""
    return ALIASES.get(key, key)


#: Endpoints that a token's ``endpoints`` list may name (those that need authentication at all).
TOKEN_ENDPOINTS: frozenset[str] = frozenset(e.key for e in _ENDPOINTS if e.auth != "none")

#: The memory-segment endpoints: a restricted token reaches them for the segments in its ``memory_segments``.
SEGMENT_ENDPOINTS: frozenset[str] = frozenset({"GET /api/user/memory-segment", "POST /api/user/memory-segment"})

#: Memory segments are numbered 0 to 99.
SEGMENT_COUNT = 100
