"""``gitops/edges/interrupts.py``: SIGINT/SIGTERM during a verification's watch are recorded, not fatal; outside it
they do what they did before (real signals sent to this process)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from gitops.edges.interrupts import Interrupt


def _signal_self(number: int) -> None:
    os.kill(os.getpid(), number)
    threading.Event().wait(5)  # the handler runs in the main thread at the next bytecode


def test_a_signal_while_verifying_is_recorded() -> None:
    interrupt = Interrupt()
    with interrupt.installed(), interrupt.verifying():
        os.kill(os.getpid(), signal.SIGTERM)
        assert interrupt.event.wait(5)
    assert interrupt.is_set
    assert interrupt.signal_name == "SIGTERM"


def test_outside_the_watch_the_previous_handler_runs_and_is_put_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    interrupt = Interrupt()
    with interrupt.installed():
        assert signal.getsignal(signal.SIGINT) != before
        with pytest.raises(KeyboardInterrupt):
            _signal_self(signal.SIGINT)
    assert not interrupt.is_set
    assert signal.getsignal(signal.SIGINT) == before


def test_an_ignored_signal_stays_ignored() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        interrupt = Interrupt()
        with interrupt.installed():
            os.kill(os.getpid(), signal.SIGTERM)  # nothing happens: the run goes on
        assert not interrupt.is_set
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_off_the_main_thread_nothing_is_installed() -> None:
    found: list[object] = []

    def run() -> None:
        with Interrupt().installed():
            found.append(signal.getsignal(signal.SIGINT))

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert found == [before]
