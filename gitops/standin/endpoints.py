"""Every endpoint the stand-in answers, keyed ``"METHOD /path"`` as in the limit table (``gitops.core.endpoints``).

The accounts file names endpoints with these keys; a restricted token reaches only the keys it lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gitops.core.endpoints import ACTIVATE, CLONE, DOWNLOAD, ENDPOINT_LIMITS, LIST, QUERY_TOKEN, UPLOAD

#: ``any-token``: any valid token (or sign-in) reaches it, whatever the token's restrictions.
Auth = Literal["none", "token", "any-token", "token-or-basic"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One route: its key and how a caller must authenticate."""

    key: str
    auth: Auth


# The code, branch and token endpoints, and every endpoint with a limit of its own, are the catalogue's keys
# (``gitops.core.endpoints``): the tool budgets, the stand-in enforces and a restricted token names the same strings.
_ENDPOINTS = (
    Endpoint("GET /api/version", "none"),
    Endpoint("GET /api/auth/me", "token"),
    Endpoint(QUERY_TOKEN, "none"),
    # Stand-in only: what the "Proceed" button of the no-rate-limit page calls.
    Endpoint("POST /api/auth/noratelimit", "none"),
    Endpoint("GET /a", "none"),
    Endpoint("GET /a/index.html", "none"),
    Endpoint(DOWNLOAD, "token-or-basic"),
    Endpoint(UPLOAD, "token-or-basic"),
    Endpoint(LIST, "token"),
    Endpoint(CLONE, "token"),
    Endpoint(ACTIVATE, "token"),
    Endpoint("POST /api/user/delete-branch", "token"),
    # The official server's; node-screeps-api's me() asks them when its token is restricted.
    Endpoint("GET /api/user/name", "any-token"),
    Endpoint("GET /api/user/find", "any-token"),
    # What `rehearse --from-server` reads of a colony (besides Memory and terrain, which have limits of their own).
    Endpoint("GET /api/user/overview", "token"),
    Endpoint("GET /api/game/room-objects", "token"),
    Endpoint("GET /api/game/time", "none"),
)

ENDPOINTS: dict[str, Endpoint] = {e.key: e for e in _ENDPOINTS} | {
    key: Endpoint(key, "token") for key in ENDPOINT_LIMITS if key not in {e.key for e in _ENDPOINTS}
}

#: Other paths of an endpoint: the private server (and so node-screeps-api and python screepsapi) has money history
#: at ``/api/user/money-history``, the interface document at ``/api/game/user/money-history``. Both are one endpoint:
#: one handler, one rate limit, one scope, one request count.
ALIASES: dict[str, str] = {"GET /api/user/money-history": "GET /api/game/user/money-history"}


def canonical_key(key: str) -> str:
    """The endpoint key a request to ``key`` (``"GET /api/user/money-history"``) is handled and counted as."""
    return ALIASES.get(key, key)


#: Endpoints that a token's ``endpoints`` list may name (those that need authentication at all).
TOKEN_ENDPOINTS: frozenset[str] = frozenset(e.key for e in ENDPOINTS.values() if e.auth in ("token", "token-or-basic"))

#: The official server's prefixes of its other worlds (``https://screeps.com/ptr``, ``/season``). The stand-in
#: answers the whole API under each of them, from the one world it keeps (docs/serve.md, "Differences").
WORLD_PREFIXES = ("/ptr", "/season")


def strip_world_prefix(path: str) -> str:
    """``/api/user/code`` for ``/season/api/user/code``; any other path as it is."""
    for prefix in WORLD_PREFIXES:
        if path.startswith(prefix + "/"):
            return path[len(prefix) :]
    return path


#: The memory-segment endpoints: a restricted token reaches them for the segments in its ``memory_segments``.
SEGMENT_ENDPOINTS: frozenset[str] = frozenset({"GET /api/user/memory-segment", "POST /api/user/memory-segment"})

#: Memory segments are numbered 0 to 99.
SEGMENT_COUNT = 100
