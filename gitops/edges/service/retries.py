"""The retries of a request whose first attempt failed transiently (tenacity), imported only then (issue 23).

Most requests succeed at once, and importing tenacity would delay a run's first request for nothing; so the client
sends the first attempt itself and hands the rest to :func:`after_first` (the lazy import is the "tenacity"
boundary of ``docs/architecture.md``). Tenacity is told of that first attempt as its own first (it is raised again
as tenacity's attempt 1), so the attempts, the backoff, the limits and the debug lines are exactly those of one
tenacity loop around every attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_any,
    wait_exponential,
)
from tenacity.stop import stop_base

T = TypeVar("T")


def after_first(
    failed: list[BaseException],
    attempt: Callable[[], T],
    *,
    retry_on: type[BaseException],
    attempts: int,
    backoff: tuple[float, float, float],
    deadline: Callable[[], float],
    sleep: Callable[[float], None],
    before_sleep: Callable[[RetryCallState], None],
) -> T:
    """What ``attempt`` returns once it succeeds, after ``failed`` (a list holding the first attempt's exception, a
    ``retry_on``; taken out of it, so that nothing keeps that attempt's answer alive during the next one). Only
    ``retry_on`` exceptions are retried; the last attempt's exception is raised when they run out. ``attempts``
    counts the first one; ``backoff`` is (first wait, longest wait, longest total waited) in seconds; no attempt
    starts at or after ``deadline()`` (a :func:`time.monotonic` instant), nor one whose wait would end past it."""
    first, longest, total = backoff

    def again() -> T:
        if failed:
            raise failed.pop()  # the attempt that already failed: tenacity's first
        return attempt()

    retrying = Retrying(
        stop=stop_any(stop_after_attempt(attempts), _StopAfterWaiting(total), _StopAtDeadline(deadline)),
        wait=wait_exponential(multiplier=first, min=first, max=longest),
        retry=retry_if_exception_type(retry_on),
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
    return retrying(again)


class _StopAtDeadline(stop_base):
    """No retry after the request's deadline (a :func:`time.monotonic` instant), nor one its backoff would start
    after it: a silent server is reported after the timeout, not after each attempt's."""

    def __init__(self, deadline: Callable[[], float]) -> None:
        self._deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        return time.monotonic() + retry_state.upcoming_sleep >= self._deadline()


class _StopAfterWaiting(stop_base):
    """Bounded in time as well as in count: ``idle_for`` is the backoff already waited (on the injected clock)."""

    def __init__(self, total: float) -> None:
        self._total = total

    def __call__(self, retry_state: RetryCallState) -> bool:
        return retry_state.idle_for >= self._total
