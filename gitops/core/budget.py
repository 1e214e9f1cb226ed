"""Rate-limit budget: what a plan needs of each limit, what is known to remain, and whether it fits.

Pure data and pure functions; the ledger (``gitops.edges.ledger``) supplies the known windows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar, Literal

from gitops.core.endpoints import GLOBAL_KEY, GLOBAL_LIMIT, Limit, limit_for


@dataclass(frozen=True, slots=True)
class WindowState:
    """What is known of one rate-limit window of a token.

    ``endpoint`` is ``"GET /api/user/code"``-style or ``gitops.core.endpoints.GLOBAL_KEY``; ``reset`` is the UTC epoch
    second at which the window's count resets; ``source`` says whether the figure came from ``X-RateLimit-*`` headers or
    from counting the requests this tool sent.
    """

    endpoint: str
    limit: int
    remaining: int
    reset: float
    learnt_at: float
    source: Literal["headers", "counted"]


Source = Literal["headers", "counted", "unknown", "unlimited"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointBudget:
    """One row of a plan's budget table: what the plan needs of one limit and what is known to remain.

    A plain frozen dataclass (no validation when made: :func:`assess` builds it from typed values); a saved plan's
    rows are validated when the plan file is read (``gitops.edges.planfile``), unknown fields refused."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    server: str
    endpoint: str
    needed: int
    limit: int
    period: int
    remaining: int | None
    reset: float | None
    reserve: int
    source: Source
    fits: bool
    #: ``remaining`` is not from the server's headers of the current window but counted from this tool's own
    #: requests: requests made elsewhere with the token are missing from it (shown as "~N left, estimated").
    estimate: bool = False
    #: Of ``needed``, the uploads held back to restore branches whose verification fails (``verify:`` with
    #: ``on_failure: rollback``); spent only on a failure, but reserved like the others.
    for_rollback: int = 0


def assess(
    server: str,
    needs: Mapping[str, int],
    windows: Mapping[str, WindowState],
    *,
    reserve: Mapping[str, int],
    unlimited_until: float | None,
    now: float,
) -> list[EndpointBudget]:
    """Check ``needs`` (requests per endpoint key) against the known windows of one server's token.

    Endpoints without a limit of their own only count against the global limit, which is shown (with every request
    the plan makes) but never refuses a plan: the client paces requests to stay under it.
    """
    unlimited = unlimited_until is not None and unlimited_until > now
    rows: list[EndpointBudget] = []
    total = sum(needs.values())
    items: list[tuple[str, int, Limit]] = [
        (endpoint, count, limit) for endpoint, count in sorted(needs.items()) if (limit := limit_for(endpoint))
    ]
    if total:
        items.append((GLOBAL_KEY, total, GLOBAL_LIMIT))
    for endpoint, count, limit in items:
        window = windows.get(endpoint)
        remaining: int | None = None
        reset: float | None = None
        source: Source = "unknown"
        if window is not None and window.reset > now:
            remaining, reset, source = max(0, window.remaining), window.reset, window.source
        held = reserve.get(endpoint, 0)
        if unlimited:
            source, reset = "unlimited", unlimited_until
            fits = True
        elif endpoint == GLOBAL_KEY:
            fits = True
        else:
            fits = count <= max(0, (limit.count if remaining is None else remaining) - held)
        rows.append(
            EndpointBudget(
                server=server,
                endpoint=endpoint,
                needed=count,
                limit=limit.count,
                period=limit.period,
                remaining=remaining,
                reset=None if reset is None else float(reset),  # a whole number from a ledger's JSON: a float
                reserve=held,
                source=source,
                fits=fits,
                estimate=source == "counted" and remaining is not None,
            )
        )
    return rows


def utc(epoch: float) -> str:
    """``2026-11-21 14:03 UTC``."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def shortfall_message(row: EndpointBudget) -> str:
    """Why a row does not fit, naming the limit and when it resets."""
    limit = Limit(row.endpoint, row.limit, row.period)
    left = row.limit if row.remaining is None else row.remaining
    held = f" ({row.reserve} reserved for you)" if row.reserve else ""
    when = f"it resets at {utc(row.reset)}" if row.reset else f"the window is {limit.describe()}"
    return (
        f"server '{row.server}': the plan needs {row.needed} x {row.endpoint} but {left} of {limit.describe()} "
        f"remain{held}; {when}"
    )


@dataclass(frozen=True, slots=True)
class BudgetFacts:
    """What the ledger knows of one server's token: its windows and the end of an unlimited period."""

    windows: Mapping[str, WindowState]
    unlimited_until: float | None = None
    reserve: Mapping[str, int] | None = None
    #: False for a password login (private servers): only token-authenticated requests are rate limited.
    limited: bool = True
