"""The rate limits of the game service, as the interface document lists them (section 8).

One table, read by the client (to budget and pace requests) and by the local stand-in service (to enforce them).
Limits apply per token; every token-authenticated request counts against the global limit and, where it has one,
against its endpoint's limit.

It also holds the sizes: the 5 MB code limit of the service, and the caps on the answers the tool reads (what a
server may send before the tool stops reading: a hostile or broken server must not exhaust its memory).
"""

from __future__ import annotations

from dataclasses import dataclass

MINUTE = 60
HOUR = 60 * MINUTE
DAY = 24 * HOUR

#: How long the no-rate-limit page lifts all limits for a token (section 3).
UNLIMITED_PERIOD = 2 * HOUR

#: The private server rejects ``JSON.stringify(modules).length`` above this many UTF-16 code units.
MAX_CODE_LENGTH = 5 * 1024 * 1024

#: A user has at most this many branches.
MAX_BRANCHES = 30

_MIB = 1024 * 1024

#: The most bytes of a code answer (``GET /api/user/code``) the tool reads, after any gzip is undone.
#:
#: The 5 MB limit counts UTF-16 code units of ``JSON.stringify(modules)``. The answer serialises the same modules
#: again; per UTF-16 unit of that count its UTF-8 bytes are at most: 1 for ASCII (escapes such as ``\n`` and
#: ``\u0001`` already count one unit per byte), 3 for a character of the Basic Multilingual Plane written raw,
#: 2 for each unit of a surrogate pair (4 bytes, 2 units), and 6 when a server escapes every non-ASCII unit as
#: ``\uXXXX`` (Python's ``ensure_ascii`` does; a lone surrogate is always escaped, and then already counted 6).
#: So the modules take at most 6 x 5 MiB = 30 MiB, and 2 MiB more covers the envelope (``ok``, ``branch``, any
#: whitespace a server adds around the modules): 32 MiB.
CODE_ANSWER_CAP = 6 * MAX_CODE_LENGTH + 2 * _MIB
#: The most bytes of ``GET /api/user/branches``. On the official server it lists names and flags (a few kB for 30
#: branches); the private server adds each branch's modules, so one answer can carry the code of 30 branches. The
#: cap is a choice, not a worst case (30 full branches of non-ASCII code could reach 30 x 32 MiB): 64 MiB holds 30
#: branches of 2 MB of code each, or 12 full ones of ASCII code, while keeping the memory of a run bounded.
BRANCHES_ANSWER_CAP = 64 * _MIB
#: The most bytes of any other answer: sign-in, token query, and the small ``{"ok":1,...}`` of every write.
SMALL_ANSWER_CAP = _MIB


def answer_cap(endpoint: str) -> int:
    """The most decoded bytes the tool reads of an answer to ``endpoint`` (``"GET /api/user/code"``)."""
    if endpoint == "GET /api/user/code":
        return CODE_ANSWER_CAP
    if endpoint == "GET /api/user/branches":
        return BRANCHES_ANSWER_CAP
    return SMALL_ANSWER_CAP


@dataclass(frozen=True, slots=True)
class Limit:
    """``count`` requests per ``period`` seconds for ``endpoint`` (``"METHOD /path"``, or ``GLOBAL_KEY``)."""

    endpoint: str
    count: int
    period: int

    def describe(self) -> str:
        unit = {MINUTE: "minute", HOUR: "hour", DAY: "day"}.get(self.period, f"{self.period} s")
        return f"{self.count} per {unit}"


GLOBAL_KEY = "global"
GLOBAL_LIMIT = Limit(GLOBAL_KEY, 120, MINUTE)

ENDPOINT_LIMITS: dict[str, Limit] = {
    limit.endpoint: limit
    for limit in (
        Limit("GET /api/game/room-terrain", 360, HOUR),
        Limit("POST /api/game/map-stats", 60, HOUR),
        Limit("GET /api/user/code", 60, HOUR),
        Limit("POST /api/user/code", 240, DAY),
        Limit("POST /api/user/set-active-branch", 240, DAY),
        Limit("GET /api/user/memory", 1440, DAY),
        Limit("POST /api/user/memory", 240, DAY),
        Limit("GET /api/user/memory-segment", 360, HOUR),
        Limit("POST /api/user/memory-segment", 60, HOUR),
        Limit("POST /api/user/console", 360, HOUR),
        Limit("GET /api/game/market/orders-index", 60, HOUR),
        Limit("GET /api/game/market/orders", 60, HOUR),
        Limit("GET /api/game/market/my-orders", 60, HOUR),
        Limit("GET /api/game/market/stats", 60, HOUR),
        Limit("GET /api/game/user/money-history", 60, HOUR),
    )
}


def endpoint_key(method: str, path: str) -> str:
    """``"GET /api/user/code"`` from a method and a path (any query string and trailing slash dropped)."""
    bare = path.split("?", 1)[0]
    if len(bare) > 1:
        bare = bare.rstrip("/")
    return f"{method.upper()} {bare}"


def limit_for(endpoint: str) -> Limit | None:
    """The endpoint's own limit, or ``None`` when only the global limit applies."""
    return ENDPOINT_LIMITS.get(endpoint)
