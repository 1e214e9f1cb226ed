"""``gitops/edges/service/observer.py``: the observer of a client nobody listens to, and the side client's observer
that hands what it learnt to the real one when told."""

from __future__ import annotations

from gitops.edges.clock import ManualClock
from gitops.edges.service.observer import DeferredObserver, Observer, Unobserved


def test_unobserved_remembers_the_last_minute_of_sends_only() -> None:
    clock = ManualClock(start=0.0)
    observer: Observer = Unobserved(clock)
    observer.record_sent("GET /a")
    clock.advance(30)
    observer.record_sent("GET /b")
    assert observer.sent_times("global", 60) == [0.0, 30.0]
    clock.advance(40)  # the first send is 70 s old now
    observer.record_sent("GET /c")
    assert observer.sent_times("global", 60) == [30.0, 70.0]
    observer.record_unsent("GET /c")  # it never left
    assert observer.sent_times("global", 60) == [30.0]
    assert observer.unlimited_until is None


def test_deferred_calls_reach_the_real_observer_in_order_only_at_replay() -> None:
    clock = ManualClock(start=0.0)
    real = Unobserved(clock)
    side = DeferredObserver(real)
    side.record_sent("GET /a")
    clock.advance(1)
    side.record_sent("GET /b")
    side.record_unsent("GET /b")
    side.remember_scope(True, ())  # only a ledger has it: dropped for any other observer
    assert real.sent_times("global", 60) == []
    side.replay()
    assert real.sent_times("global", 60) == [1.0]  # both sent when replayed (at the clock's time), one taken back
    side.replay()  # told once
    assert real.sent_times("global", 60) == [1.0]


def test_a_deferred_observer_reads_pacing_facts_from_the_real_one() -> None:
    clock = ManualClock(start=0.0)
    real = Unobserved(clock)
    real.record_sent("GET /main")
    side = DeferredObserver(real)
    assert side.sent_times("global", 60) == [0.0]
    assert side.unlimited_until is None
