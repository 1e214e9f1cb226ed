"""What the endpoint handlers and the game socket read of the running stand-in: its parts, not the app itself.

:class:`gitops.standin.app.StandInApp` owns the accounts, the store, the clock and the rate limiter, and makes the
handlers and the socket hub with itself as their :class:`StandInParts`. They are typed against this protocol rather
than the app, so that neither imports the module that imports them. The parts are read through the app on every use,
as before, never copied.
"""

from __future__ import annotations

from typing import Protocol

from gitops.edges.clock import Clock
from gitops.standin.accounts import Accounts
from gitops.standin.ratelimit import RateLimiter
from gitops.standin.store import Store


class StandInParts(Protocol):
    """The parts of a running stand-in that its handlers and its socket hub use."""

    @property
    def accounts(self) -> Accounts: ...

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def limiter(self) -> RateLimiter: ...

    #: Whether the control routes are on (``gitops serve --testing``, tests): the console then follows their rules.
    @property
    def testing(self) -> bool: ...
