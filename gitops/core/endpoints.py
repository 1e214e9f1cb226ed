"""The catalogue of the game service: the endpoints this tool uses, their rate limits, and the scopes each
command needs (the interface document, sections 3 and 8).

One module, read by the planner (what a plan spends), the client (pacing, 429s, 403 messages), ``gitops token``
(what a restricted token lacks) and the local stand-in service (to enforce the limits). Limits apply per token;
every token-authenticated request counts against the global limit and, where it has one, against its endpoint's
limit. How the ``X-RateLimit-*`` headers are read (which window they describe, their numbers) is here too, so that
the client and the ledger read them alike. It also holds the sizes: the 5 MB code limit of the service, and the
caps on the answers the tool reads (what a server may send before the tool stops reading: a hostile or broken
server must not exhaust its memory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import urlsplit

MINUTE = 60
HOUR = 60 * MINUTE
DAY = 24 * HOUR

#: How long the no-rate-limit page lifts all limits for a token (section 3).
UNLIMITED_PERIOD = 2 * HOUR

#: The private server rejects ``JSON.stringify(modules).length`` above this many UTF-16 code units.
MAX_CODE_LENGTH = 5 * 1024 * 1024

#: The private server's limit on a request body (body-parser's ``limit: '8mb'``: 8 MiB of UTF-8 JSON, after inflating
#: a compressed body); larger bodies are refused with 413 before the route runs. The official server's is not
#: documented and is assumed the same.
MAX_BODY_BYTES = 8 * 1024 * 1024

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
#: The most bytes of a Memory answer (gzip + base64 of at most 2 MiB of JSON, the game's Memory limit: well under
#: 4 MiB) and of a room's objects (a full room of level 8 is a few hundred kB).
COLONY_ANSWER_CAP = 8 * _MIB


@dataclass(frozen=True, slots=True)
class Limit:
    """``count`` requests per ``period`` seconds for ``endpoint`` (``"METHOD /path"``, or ``GLOBAL_KEY``)."""

    endpoint: str
    count: int
    period: int

    def describe(self) -> str:
        unit = {MINUTE: "minute", HOUR: "hour", DAY: "day"}.get(self.period, f"{self.period} s")
        return f"{self.count} per {unit}"


#: The endpoints plan and apply use, keyed ``"METHOD /path"`` as the limit table and the accounts file key them.
DOWNLOAD = "GET /api/user/code"
UPLOAD = "POST /api/user/code"
LIST = "GET /api/user/branches"
CLONE = "POST /api/user/clone-branch"
ACTIVATE = "POST /api/user/set-active-branch"
QUERY_TOKEN = "GET /api/auth/query-token"  # noqa: S105 - an endpoint, not a password
SIGNIN = "POST /api/auth/signin"
#: What ``rehearse --from-server`` reads (read-only): the owned rooms, Memory, and each room's terrain and objects.
OVERVIEW = "GET /api/user/overview"
MEMORY_READ = "GET /api/user/memory"
TERRAIN = "GET /api/game/room-terrain"
ROOM_OBJECTS = "GET /api/game/room-objects"

#: What a restricted token needs for ``plan`` (which lists the branches, then downloads what it must) and, in
#: addition, for ``apply``; named in 403 messages and by ``gitops token``.
PLAN_ENDPOINTS: tuple[str, ...] = (DOWNLOAD,)
#: Optional for plan: without it, branch existence is learnt from the code download and activation is re-sent.
LIST_ENDPOINT = LIST
APPLY_ENDPOINTS: tuple[str, ...] = (UPLOAD, CLONE, ACTIVATE)

#: The branch name the compression probe activates: never a real one (the probe is sent only when the branch list
#: shows no branch of that name), and too long for the game's own branch names.
PROBE_BRANCH = "gitops-compression-probe-0000000"

GLOBAL_KEY = "global"
GLOBAL_LIMIT = Limit(GLOBAL_KEY, 120, MINUTE)


def pacing_wait(sent: list[float], now: float) -> float:
    """Seconds to wait before one more request fits the global limit (120 per minute), given the times of the
    requests sent in the last minute, oldest first; 0 when it fits now."""
    if len(sent) < GLOBAL_LIMIT.count:
        return 0.0
    # Once the oldest of the last 120 requests leaves the minute, one more fits.
    return max(0.0, sent[len(sent) - GLOBAL_LIMIT.count] + MINUTE - now)


ENDPOINT_LIMITS: dict[str, Limit] = {
    limit.endpoint: limit
    for limit in (
        Limit("GET /api/game/room-terrain", 360, HOUR),
        Limit("POST /api/game/map-stats", 60, HOUR),
        Limit(DOWNLOAD, 60, HOUR),
        Limit(UPLOAD, 240, DAY),
        Limit(ACTIVATE, 240, DAY),
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


def path_of(endpoint: str) -> str:
    """``"/api/user/code"`` from an endpoint key such as ``"GET /api/user/code"``: the path a request is sent to."""
    return endpoint.split(" ", 1)[1]


def endpoint_key(method: str, path: str) -> str:
    """``"GET /api/user/code"`` from a method and a path (any query string and trailing slash dropped)."""
    bare = path.split("?", 1)[0]
    if len(bare) > 1:
        bare = bare.rstrip("/")
    return f"{method.upper()} {bare}"


def answer_cap(endpoint: str) -> int:
    """The most decoded bytes the tool reads of an answer to ``endpoint`` (``"GET /api/user/code"``)."""
    if endpoint == DOWNLOAD:
        return CODE_ANSWER_CAP
    if endpoint == LIST:
        return BRANCHES_ANSWER_CAP
    if endpoint in (MEMORY_READ, ROOM_OBJECTS):
        return COLONY_ANSWER_CAP
    return SMALL_ANSWER_CAP


def limit_for(endpoint: str) -> Limit | None:
    """The endpoint's own limit, or ``None`` when only the global limit applies."""
    return ENDPOINT_LIMITS.get(endpoint)


# --- reading the X-RateLimit-* headers (the client and the ledger read them alike) ---------------------------

#: The longest window of any limit (a day): no reset is further away than this.
LONGEST_PERIOD = max(limit.period for limit in ENDPOINT_LIMITS.values())


def window_key(endpoint: str, header_limit: int) -> str:
    """Which window a response's ``X-RateLimit-*`` headers describe.

    The interface does not say whether they report the global or the endpoint window. Every endpoint limit differs
    from the global 120, so the ``X-RateLimit-Limit`` value tells them apart; an unknown value is taken as the
    endpoint's own window when it has one (the server's word beats our table), else as the global one.
    """
    own = limit_for(endpoint)
    if own is not None and header_limit == own.count:
        return endpoint
    if header_limit == GLOBAL_LIMIT.count:
        return GLOBAL_KEY
    return endpoint if own is not None else GLOBAL_KEY


#: Header numbers beyond this are nonsense (no window counts so many requests; epoch milliseconds stay below it).
_MAX_HEADER_NUMBER = 1e15


def header_number(value: str | None) -> float | None:
    """A rate-limit header's number, or ``None`` when it is missing, not a number, not finite or absurdly large."""
    if value is None:
        return None
    try:
        number = float(value.strip())
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(number) or abs(number) > _MAX_HEADER_NUMBER:
        return None
    return number


def reset_time(value: float, now: float) -> float:
    """``X-RateLimit-Reset`` as UTC epoch seconds, at most a day (the longest window) from ``now``.

    The interface says epoch seconds; a value in milliseconds (over 10^11) is scaled, and a small value (under
    10^9) is taken as seconds from now, which some servers send.
    """
    if value > 1e11:
        value /= 1000.0
    elif value < 1e9:
        value = now + value
    return min(value, now + LONGEST_PERIOD)


def is_official(url: str) -> bool:
    """Whether ``url`` is the official server (screeps.com, with or without /ptr or /season): its branch list
    carries no modules, and it takes tokens."""
    return (urlsplit(url).hostname or "").lower() in ("screeps.com", "www.screeps.com")
