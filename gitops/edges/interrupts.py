"""SIGINT and SIGTERM during a verification's watch (issue 39): finish the step in flight, then stop and record.

GitHub cancels a job (and ends one past ``timeout-minutes``) with SIGINT, then SIGTERM, then SIGKILL. While a
verification runs (:meth:`Interrupt.verifying`), either signal only sets :attr:`Interrupt.event`: the watch stops
at its next poll (``edges/socket.py``'s receive is sliced for it), an undo already sent is finished, and the
verification is recorded as ``interrupted``. Outside a verification the signals do what they did before (SIGINT:
``KeyboardInterrupt``; SIGTERM: the process ends). Handlers can only be set in the main thread: :meth:`installed`
does nothing elsewhere (the watch then cannot be interrupted gently, and a kill leaves ``pending``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

SIGNALS: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)


class Interrupt:
    """The run's answer to SIGINT/SIGTERM while verifying."""

    def __init__(self) -> None:
        self.event = threading.Event()
        #: The name of the signal that came (``SIGINT``), once one did.
        self.signal_name: str | None = None
        self._verifying = 0
        self._lock = threading.Lock()
        self._previous: dict[int, Any] = {}

    @property
    def is_set(self) -> bool:
        return self.event.is_set()

    @contextlib.contextmanager
    def verifying(self) -> Iterator[None]:
        """While inside, SIGINT/SIGTERM set :attr:`event` instead of ending the run."""
        with self._lock:
            self._verifying += 1
        try:
            yield
        finally:
            with self._lock:
                self._verifying -= 1

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Handlers for SIGINT and SIGTERM for the duration (main thread only), the previous ones put back after."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        for number in SIGNALS:
            self._previous[number] = signal.signal(number, self._handle)
        try:
            yield
        finally:
            for number, handler in self._previous.items():
                signal.signal(number, handler)
            self._previous.clear()

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self._verifying > 0:
            self.signal_name = signal.Signals(number).name
            self.event.set()
            return
        previous = self._previous.get(number)
        if callable(previous):
            previous(number, frame)
            return
        if previous == signal.SIG_IGN:
            return
        # The default action (SIGTERM: the process ends), as without these handlers.
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)


__all__ = ["Interrupt"]
