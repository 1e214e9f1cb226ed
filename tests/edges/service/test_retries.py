"""``gitops/edges/service/retries.py``: the attempts after a failed first one, bounded in count, in time waited and
by the request's deadline (sleeping on a list, so no test waits)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from gitops.edges.service.retries import after_first


class Flaky(Exception):
    pass


def _attempts(results: list[object]) -> Callable[[], object]:
    def attempt() -> object:
        result = results.pop(0)
        if isinstance(result, BaseException):
            raise result
        return result

    return attempt


def _retry(
    results: list[object],
    *,
    attempts: int = 4,
    deadline: float = 1e9,
    total: float = 100.0,
    slept: list[float] | None = None,
) -> tuple[object, list[float]]:
    slept = [] if slept is None else slept
    value = after_first(
        [Flaky("first")],
        _attempts(results),
        retry_on=Flaky,
        attempts=attempts,
        backoff=(0.5, 4.0, total),
        deadline=lambda: time.monotonic() + deadline,
        sleep=slept.append,
        before_sleep=lambda state: None,
    )
    return value, slept


def test_the_first_success_after_the_failed_first_attempt_is_returned() -> None:
    value, slept = _retry([Flaky("second"), "answer"])
    assert value == "answer"
    assert slept == [0.5, 1.0]  # exponential from the first wait


def test_when_attempts_run_out_the_last_failure_is_raised() -> None:
    with pytest.raises(Flaky, match="third"):
        _retry([Flaky("second"), Flaky("third"), "never"], attempts=3)


def test_another_exception_is_not_retried() -> None:
    with pytest.raises(KeyError):
        _retry([KeyError("not transient"), "never"])


def test_no_attempt_whose_wait_would_end_past_the_deadline() -> None:
    slept: list[float] = []
    with pytest.raises(Flaky, match="first"):
        _retry(["never"], deadline=0.1, slept=slept)  # the first wait (0.5 s) would end past it
    assert slept == []


def test_the_time_waited_is_bounded() -> None:
    slept: list[float] = []
    with pytest.raises(Flaky, match=r"^2$"):
        _retry([Flaky(str(n)) for n in range(1, 20)], attempts=20, total=1.4, slept=slept)
    assert slept == [0.5, 1.0]  # 1.5 s waited: no third wait
