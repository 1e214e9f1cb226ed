"""Pacing of ``gitops watch``: how many uploads an hour, and when the next may go. Pure: times are given.

The day's ``POST /api/user/code`` limit (240 a day) would be gone in an afternoon of saving every few seconds. Watch
spreads it: by default at most ``(limit - budget.reserve) / 24`` uploads an hour (10 with no reserve), so that a
whole day of watching never spends more than the day's limit less the reserve. The window slides: an upload may go
as soon as fewer than that many were made in the hour before it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from gitops.core.endpoints import UPLOAD, limit_for

#: The pacing window: an hour.
HOUR = 3600.0


def default_uploads_per_hour(reserve: Mapping[str, int]) -> int:
    """The default pace: the upload limit of the catalogue less ``budget.reserve``'s share, spread over its period
    in hours, rounded down (``(240 - reserve) / 24``); 0 when the reserve leaves nothing."""
    limit = limit_for(UPLOAD)
    assert limit is not None  # the catalogue has the upload limit
    usable = max(0, limit.count - reserve.get(UPLOAD, 0))
    return math.floor(usable * HOUR / limit.period)


@dataclass
class Pacer:
    """At most ``per_hour`` uploads in any hour (a sliding window over the uploads :meth:`record` was told of)."""

    per_hour: int
    sent: list[float] = field(default_factory=list)

    def _recent(self, now: float) -> list[float]:
        return [t for t in self.sent if now - t < HOUR]

    def next_slot(self, now: float, count: int = 1) -> float:
        """The earliest time (``>= now``) at which ``count`` more uploads fit; ``now`` when they fit at once.

        ``count`` above ``per_hour`` is treated as ``per_hour`` (a deploy that needs more uploads than an hour allows
        goes when the window is empty, rather than never)."""
        count = max(1, min(count, self.per_hour))
        recent = sorted(self._recent(now))
        over = len(recent) + count - self.per_hour
        if over <= 0:
            return now
        # The window must lose `over` uploads: it does when the over-th oldest is an hour old.
        return max(now, recent[over - 1] + HOUR)

    def record(self, now: float, count: int) -> None:
        """``count`` uploads were made at ``now`` (older entries than an hour are forgotten)."""
        self.sent = [*self._recent(now), *([now] * count)]

    def left(self, now: float) -> int:
        """Uploads that may still go in the current hour."""
        return max(0, self.per_hour - len(self._recent(now)))
