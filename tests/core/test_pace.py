"""The pace of ``gitops watch`` (``gitops.core.pace``): pure, times given."""

from __future__ import annotations

from gitops.core.endpoints import UPLOAD
from gitops.core.pace import HOUR, Pacer, default_uploads_per_hour
from gitops.edges.clock import ManualClock


def test_default_pace_is_the_days_limit_less_the_reserve_over_24_hours() -> None:
    assert default_uploads_per_hour({}) == 10
    assert default_uploads_per_hour({UPLOAD: 24}) == 9
    assert default_uploads_per_hour({UPLOAD: 23}) == 9  # rounded down: the day is never overspent
    assert default_uploads_per_hour({UPLOAD: 240}) == 0
    assert default_uploads_per_hour({UPLOAD: 500}) == 0
    assert default_uploads_per_hour({"POST /api/user/clone-branch": 100}) == 10


def test_after_n_uploads_the_next_waits_until_the_oldest_is_an_hour_old() -> None:
    clock = ManualClock()
    pacer = Pacer(3)
    start = clock.now()
    for _ in range(3):
        assert pacer.next_slot(clock.now()) == clock.now()
        pacer.record(clock.now(), 1)
        clock.advance(60)
    assert pacer.left(clock.now()) == 0
    assert pacer.next_slot(clock.now()) == start + HOUR
    clock.advance(start + HOUR - clock.now())
    assert pacer.next_slot(clock.now()) == clock.now()
    assert pacer.left(clock.now()) == 1


def test_a_deploy_of_several_uploads_waits_for_room_for_all() -> None:
    pacer = Pacer(3)
    pacer.record(1000.0, 1)
    pacer.record(1100.0, 1)
    assert pacer.next_slot(1200.0, 1) == 1200.0
    assert pacer.next_slot(1200.0, 2) == 1000.0 + HOUR
    assert pacer.next_slot(1200.0, 3) == 1100.0 + HOUR
    # More than an hour allows: it goes once the window is empty, rather than never.
    assert pacer.next_slot(1200.0, 7) == 1100.0 + HOUR


def test_old_uploads_are_forgotten() -> None:
    pacer = Pacer(2)
    pacer.record(0.0, 2)
    pacer.record(HOUR + 1, 1)
    assert pacer.sent == [HOUR + 1]
    assert pacer.left(HOUR + 2) == 1
