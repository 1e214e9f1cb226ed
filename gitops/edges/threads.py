"""Helper threads that leave the process's signals to the main thread.

Python runs signal handlers in the main thread only, but the kernel may hand a signal sent to the process to any
thread that does not block it. When that is a helper thread while the main thread waits in a socket read, the main
thread is not woken: a Ctrl-C would wait for the server's answer (or the deadline). A thread started here blocks
SIGINT and SIGTERM from its first instruction (a new thread inherits its creator's signal mask), so such signals
always reach the main thread.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

_T = TypeVar("_T")

#: The signals that stop a run: only the main thread may receive them.
STOPPING = (signal.SIGINT, signal.SIGTERM)


def start_quiet(thread: threading.Thread) -> None:
    """Start ``thread`` with :data:`STOPPING` blocked in it (where the platform has signal masks)."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no masks, and no such delivery either
        thread.start()
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)
    try:
        thread.start()
    finally:
        # A signal that came meanwhile was held for the process; unblocking here delivers it to this thread.
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


class Background(Generic[_T]):
    """``work()`` in a helper thread started here (:func:`start_quiet`); :meth:`result` waits for it and returns its
    value or raises its exception, :attr:`error` says (after :meth:`join`) whether it raised. The work must not
    touch what the caller's thread changes meanwhile."""

    def __init__(self, work: Callable[[], _T], *, name: str = "gitops-background") -> None:
        self._work = work
        self._value: _T | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        start_quiet(self._thread)

    def _run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as exc:  # handed to result()
            self.error = exc

    def join(self) -> None:
        self._thread.join()

    def result(self) -> _T:
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self._value  # type: ignore[return-value]  # set by _run when it did not raise
