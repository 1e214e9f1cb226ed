"""Time as an injectable edge: the core never reads the system clock itself.

Rate-limit windows, budgets, pacing and deploy records all depend on the time. With the clock passed in, the tests
move it by a day in a line (the stand-in shares a :class:`ManualClock` with the tool) instead of waiting, and the
pure core stays pure: it is given ``now``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol


class Clock(Protocol):
    """Wall-clock seconds (UTC epoch) and sleeping; tests pass a clock they move by hand."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ManualClock:
    """A clock that only moves when told to; ``sleep`` moves it instead of waiting."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self.slept: list[float] = []

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if seconds > 0:
            self._now += seconds


#: Around a wait that may last (a server's answer, a retry's pause, another run's lock): a context manager that
#: shows signs of life (``gitops.render.progress.Progress.waiting``) and yields a function that replaces the wait's
#: description as it goes on.
Waiting = Callable[[str], AbstractContextManager[Callable[[str], None]]]
