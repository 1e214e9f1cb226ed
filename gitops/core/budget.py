"""Rate-limit budget: what a plan needs of each limit, what is known to remain, and whether it fits.

Pure data and pure functions. The ledger (``gitops.edges.ledger``) keeps only the records: the requests this tool
sent and the last ``X-RateLimit-*`` headers of each endpoint. The arithmetic over them lives here, beside the plan's
budget that reads it, so that it is tested without a file or a clock: which requests count in a window (the last
minute, hour or day), what remains of it, when it frees, and how long a record can still matter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol, TypeVar

from gitops.core.endpoints import (
    ENDPOINT_LIMITS,
    GLOBAL_KEY,
    GLOBAL_LIMIT,
    LONGEST_PERIOD,
    MINUTE,
    Limit,
    limit_for,
    window_key,
)


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


# --- the windows, from the ledger's records -----------------------------------------------------------------------

#: The requests sent to one endpoint: ``(sent at, sequence number)``, oldest first.
Sent = Sequence[tuple[float, int]]


if TYPE_CHECKING:  # a type only: the ledger's records have these fields

    class HeadersSeen(Protocol):
        """The last ``X-RateLimit-*`` headers of an endpoint, as the ledger records them."""

        @property
        def limit(self) -> int: ...
        @property
        def remaining(self) -> int: ...
        @property
        def reset(self) -> float: ...
        @property
        def learnt_at(self) -> float: ...
        @property
        def seq(self) -> int:
            """Sequence number of the last request sent when these headers arrived: later requests are subtracted."""
            ...

    _Seen = TypeVar("_Seen", bound=HeadersSeen)


def sent_to(sent: Mapping[str, Sent], key: str) -> list[tuple[float, int]]:
    """The requests that count in window ``key``: those to the endpoint, or to any for ``GLOBAL_KEY``."""
    if key == GLOBAL_KEY:
        return [entry for entries in sent.values() for entry in entries]
    return list(sent.get(key, []))


def sent_since(sent: Sent, since: float) -> list[float]:
    """When the requests of ``sent`` after ``since`` were sent, in order."""
    return sorted(t for t, _ in sent if t > since)


def sent_after(sent: Sent, sequence: int) -> int:
    """How many requests of ``sent`` came after request number ``sequence``."""
    return sum(1 for _, seq in sent if seq > sequence)


def window_states(headers: Mapping[str, HeadersSeen], sent: Mapping[str, Sent], now: float) -> dict[str, WindowState]:
    """What is known to remain at ``now`` of the global window and of every endpoint window in the limits table.

    From headers while their window has not reset (less the requests sent since they arrived); otherwise by
    counting this tool's requests in the window's period (after the last known reset). Requests made with the
    same token by other tools are only seen through headers.
    """
    out: dict[str, WindowState] = {}
    for key, limit in [(GLOBAL_KEY, GLOBAL_LIMIT), *ENDPOINT_LIMITS.items()]:
        latest = latest_headers(r for endpoint, r in headers.items() if window_key(endpoint, r.limit) == key)
        out[key] = window_state(key, limit, latest, sent_to(sent, key), now)
    return out


def latest_headers(records: Iterable[_Seen]) -> _Seen | None:
    """The headers learnt last (by time, then by the request they followed)."""
    return max(records, key=lambda r: (r.learnt_at, r.seq), default=None)


def window_state(key: str, limit: Limit, latest: HeadersSeen | None, sent: Sent, now: float) -> WindowState:
    """What remains at ``now`` of window ``key`` and when it frees, from its ``latest`` headers and the requests
    ``sent`` that count in it."""
    if latest is not None and latest.reset > now:
        since = sent_after(sent, latest.seq)
        return WindowState(
            key, latest.limit, max(0, latest.remaining - since), latest.reset, latest.learnt_at, "headers"
        )
    floor = now - limit.period
    if latest is not None:
        # Requests before the last known reset were counted in a window that is over.
        floor = max(floor, latest.reset)
    times = sent_since(sent, floor)
    reset = times[0] + limit.period if times else now + limit.period
    return WindowState(key, limit.count, max(0, limit.count - len(times)), reset, now, "counted")


def sent_kept_for(endpoint: str) -> int:
    """How long a request to ``endpoint`` can still count in a window: the global minute, and the endpoint's own
    period."""
    own = limit_for(endpoint)
    return max(MINUTE, own.period if own else 0)


def headers_outlived(record: HeadersSeen, now: float) -> bool:
    """Whether headers can no longer tell anything of a window: their window reset more than the global period ago,
    and they were learnt before the longest period."""
    return record.reset < now - GLOBAL_LIMIT.period and record.learnt_at < now - LONGEST_PERIOD
