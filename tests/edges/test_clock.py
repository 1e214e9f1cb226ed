"""``gitops/edges/clock.py``: the real clock and the one tests move by hand."""

from __future__ import annotations

import time

from gitops.edges.clock import Clock, ManualClock, SystemClock


def test_the_manual_clock_moves_only_when_told_and_sleeping_moves_it() -> None:
    clock = ManualClock(start=100.0)
    assert clock.now() == 100.0
    clock.advance(3600)
    assert clock.now() == 3700.0
    clock.sleep(2.5)
    clock.sleep(0)
    clock.sleep(-1)  # recorded, but a negative wait does not turn time back
    assert clock.now() == 3702.5
    assert clock.slept == [2.5, 0, -1]


def test_the_system_clock_is_the_wall_clock_and_ignores_a_wait_of_nothing() -> None:
    clock: Clock = SystemClock()
    before = time.time()
    now = clock.now()
    assert before <= now <= time.time()
    started = time.monotonic()
    clock.sleep(-5)
    clock.sleep(0.01)
    assert 0.01 <= time.monotonic() - started < 1.0
