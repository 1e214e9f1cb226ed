"""Signs of life during long waits: one place that shows what the run is waiting for, and since when.

The edges report their waits through :meth:`Progress.waiting` (a context manager around the wait: a server's
answer, a retry's pause, another run's lock). Nothing is shown for a wait that ends within :data:`QUIET` (a second);
after that, on a terminal (stderr is one), one live status line on stderr says what is awaited and for how long,
rewritten every half second and cleared when the wait ends; without a terminal (CI logs), one plain line when the
wait has lasted a second, then one every :data:`EVERY` seconds. Waits in several threads (servers asked at the same
time) share the line. stdout, and so ``--json``, is never written to.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

from gitops.edges.threads import start_quiet

#: A wait shorter than this shows nothing.
QUIET = 1.0
#: Without a terminal, how often a wait that goes on is mentioned again.
EVERY = 10.0
#: How often the terminal's status line is rewritten.
TICK = 0.5


@dataclass
class _Wait:
    what: str
    started: float
    #: When a plain line last mentioned it.
    last: float | None = None


class Progress:
    """What the run waits for, shown on ``stream`` (stderr): live at a terminal (``live``), plain lines otherwise."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        if live is None:
            try:
                live = bool(self._stream.isatty())
            except (AttributeError, ValueError):
                live = False
        self._live = live
        self._clock = clock
        self._lock = threading.Lock()
        self._waits: dict[int, _Wait] = {}
        self._next = 0
        self._ticker: threading.Thread | None = None
        self._shown = False
        self._wake = threading.Event()

    @contextlib.contextmanager
    def waiting(self, what: str) -> Iterator[Callable[[str], None]]:
        """Around a wait for ``what`` ("server 'local' to answer GET /api/user/branches"); yields a function that
        replaces the description as the wait goes on ("... 40% sent")."""
        with self._lock:
            self._next += 1
            key = self._next
            self._waits[key] = _Wait(what, self._clock())
            self._start_ticker()

        def update(text: str) -> None:
            with self._lock:
                wait = self._waits.get(key)
                if wait is not None:
                    wait.what = text

        try:
            yield update
        finally:
            with self._lock:
                self._waits.pop(key, None)
                if not self._waits:
                    self._clear()

    def _start_ticker(self) -> None:
        if self._ticker is not None and self._ticker.is_alive():
            self._wake.set()
            return
        self._ticker = threading.Thread(target=self._tick, name="gitops-progress", daemon=True)
        start_quiet(self._ticker)

    def _tick(self) -> None:
        while True:
            self._wake.wait(TICK)
            self._wake.clear()
            with self._lock:
                if not self._waits:
                    self._ticker = None
                    return
                self._show()

    def _show(self) -> None:
        now = self._clock()
        due = [(w, now - w.started) for w in self._waits.values() if now - w.started >= QUIET]
        if not due:
            return
        if self._live:
            text = "; ".join(f"{w.what} ({age:.0f} s)" for w, age in due)
            self._write(f"\r\033[Kwaiting for {text}")
            self._shown = True
            return
        for wait, age in due:
            if wait.last is None or now - wait.last >= EVERY:
                wait.last = now
                self._write(f"waiting for {wait.what} ({age:.0f} s so far)\n")

    def _clear(self) -> None:
        if self._live and self._shown:
            self._write("\r\033[K")
            self._shown = False

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stream.write(text)
            self._stream.flush()


def size_text(count: int) -> str:
    """``1.2 MB`` for a body's size in a wait's description."""
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f} MB"
    return f"{count / 1000:.0f} kB"
