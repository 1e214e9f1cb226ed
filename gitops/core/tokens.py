"""What the server's token query (``GET /api/auth/query-token``) says of a token: full or restricted, its endpoints
and segments, and how long it is unlimited.

The answer's field spellings differ between clients and the stand-in, and its times may be seconds or milliseconds,
a duration or an end time; reading them is a pure fact, kept here once and tested without a server. What a
credential value itself may hold is :mod:`gitops.config.logins`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gitops.core.endpoints import DAY

__all__ = ["TokenInfo", "token_info"]


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
