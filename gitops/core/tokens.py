"""What a token says: the two login kinds, what a credential value may hold, an account's fingerprint, and what the
server's token query says of a token.

A token is read in three places (the credentials, the client sending it, the client reading the server's word on
it); the rules for what such a string says are pure facts, kept here once so that those three agree and can be
tested without a server, a file or httpx. Nothing here sends, reads or logs: the callers own the wording of their
errors and the secrets (:class:`gitops.secrets.Secret`); this module only looks at strings and numbers.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gitops.core.endpoints import DAY

__all__ = [
    "LoginKind",
    "TokenInfo",
    "account_fingerprint",
    "header_safe",
    "token_info",
    "value_problem",
]

#: How a server is logged in to: a persistent token (official servers), or a user name and password signing in
#: (private servers, screepsmod-auth).
LoginKind = Literal["token", "password"]

#: What a session token must look like to be sent back as a header: printable ASCII without spaces.
_HEADER_SAFE = re.compile(r"^[\x21-\x7e]+$")


def header_safe(value: str) -> bool:
    """Whether ``value`` can travel as an HTTP header value as it is (printable ASCII, no whitespace)."""
    return bool(_HEADER_SAFE.match(value))


def value_problem(value: str, *, header: bool) -> str | None:
    """What is wrong with a credential value, in words (``"contains whitespace"``), or ``None``.

    ``header``: the value travels in an HTTP header (a token, a user name), so it must be printable ASCII without
    whitespace; otherwise (a password, in a JSON body) only control characters and broken text are refused.
    """
    for char in value:
        if char in "\r\n":
            return "contains a line break (carriage return or newline)"
        category = unicodedata.category(char)
        if category == "Cs":
            return "contains bytes that are not valid UTF-8"
        if category == "Cc":
            return "contains a control character"
        if header and char.isspace():
            return "contains whitespace"
        if header and not char.isascii():
            return "contains a non-ASCII character (only letters, digits and ASCII punctuation can be sent)"
    return None


def account_fingerprint(url: str, username: str) -> str:
    """A hash of server URL and user name: one ledger per account, the same across password changes."""
    raw = f"screeps-gitops\0{url.rstrip('/').lower()}\0{username}".encode()
    return hashlib.sha256(raw).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """What ``GET /api/auth/query-token`` says of the token.

    ``unlimited_until`` is the UTC epoch second its unlimited period ends (``None``: limited now);
    ``unlimited_seconds`` is how long that is from now (0 when limited).
    """

    full: bool
    endpoints: tuple[str, ...]
    websockets: tuple[str, ...]
    memory_segments: tuple[int, ...]
    unlimited_until: float | None
    unlimited_seconds: float


def token_info(data: Mapping[str, Any], now: float) -> TokenInfo:
    """Read the token query's answer, accepting the field spellings seen in clients and the stand-in."""
    raw = data.get("token")
    token: Mapping[str, Any] = raw if isinstance(raw, dict) else data
    segments = token.get("memorySegments", token.get("memory_segments", []))
    until = _unlimited_until(token, data, now)
    return TokenInfo(
        full=bool(token.get("full")),
        endpoints=_strings(token.get("endpoints")),
        websockets=_strings(token.get("websockets")),
        memory_segments=tuple(int(s) for s in segments if isinstance(s, int)) if isinstance(segments, list) else (),
        unlimited_until=until,
        unlimited_seconds=max(0.0, until - now) if until is not None else 0.0,
    )


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, dict):
        return tuple(sorted(str(k) for k, v in value.items() if v))
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return ()


def _unlimited_until(token: Mapping[str, Any], data: Mapping[str, Any], now: float) -> float | None:
    """The end of the unlimited period the answer states, or ``None`` (limited, or nothing readable)."""
    # A duration is read first: it does not depend on the two clocks agreeing; an end time is the fallback.
    until: float | None = None
    for key in ("unlimitedSeconds", "unlimited_seconds"):
        value = token.get(key, data.get(key))
        if _number(value):
            until = now + float(value) if value > 0 else None
            break
    else:
        for key in ("unlimitedUntil", "noRateLimitUntil", "unlimited_until"):
            value = token.get(key, data.get(key))
            if _number(value):
                until = float(value) / 1000.0 if value > 1e11 else float(value)
                break
    if until is not None and until <= now:
        until = None
    if until is not None:
        until = min(until, now + float(DAY))  # the period is two hours; more than a day is the server's nonsense
    return until


def _number(value: Any) -> bool:
    # JSON may hold 1e400 (inf), NaN or a 400-digit integer: none is a time.
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) < 1e15
    return isinstance(value, int) and abs(value) < 10**15
