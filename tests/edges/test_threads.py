"""``gitops/edges/threads.py``: helper threads that never receive SIGINT/SIGTERM, and work handed back."""

from __future__ import annotations

import signal
import threading

import pytest

from gitops.edges.threads import STOPPING, Background, start_quiet


def test_a_quiet_thread_has_the_stopping_signals_blocked_and_the_caller_keeps_its_mask() -> None:
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    seen: list[set[int]] = []
    thread = threading.Thread(target=lambda: seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
    start_quiet(thread)
    thread.join()
    assert set(STOPPING) <= seen[0]
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


def test_background_work_hands_back_its_value() -> None:
    work = Background(lambda: threading.current_thread().name, name="gitops-test")
    assert work.result() == "gitops-test"
    assert work.error is None


def test_background_work_hands_back_its_exception() -> None:
    def fails() -> None:
        raise ValueError("boom")

    work = Background(fails)
    work.join()
    assert isinstance(work.error, ValueError)
    with pytest.raises(ValueError, match="boom"):
        work.result()
