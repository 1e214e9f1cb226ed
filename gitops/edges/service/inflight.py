"""The writes sent to a server and not answered yet, so that a Ctrl-C can name what it may have cut.

A write whose answer never came may or may not have landed; the CLI says so when it is interrupted, naming each
write, and the next plan checks the server. This is process-wide state (the CLI reads it from its signal path, not
from a client), kept apart from the client so that it needs no httpx and no client object.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["in_flight", "writes_in_flight"]

#: The writes sent and not answered yet, in words ("the upload to local/main"): what a Ctrl-C may have cut.
_WRITES_IN_FLIGHT: list[str] = []
_WRITES_LOCK = threading.Lock()


#: The writes a Ctrl-C (KeyboardInterrupt) cut while they were in flight.
_WRITES_CUT: list[str] = []


@contextlib.contextmanager
def in_flight(what: str) -> Iterator[None]:
    """``what`` (in words) is in flight while the block runs; a KeyboardInterrupt in it is remembered as a cut."""
    with _WRITES_LOCK:
        _WRITES_IN_FLIGHT.append(what)
    try:
        yield
    except KeyboardInterrupt:
        with _WRITES_LOCK:
            _WRITES_CUT.append(what)
        raise
    finally:
        with _WRITES_LOCK:
            _WRITES_IN_FLIGHT.remove(what)


def writes_in_flight() -> list[str]:
    """The writes sent to a server whose answer has not come (yet, or ever: a Ctrl-C cut them); the CLI names them
    when it is interrupted."""
    with _WRITES_LOCK:
        found = [*_WRITES_CUT, *_WRITES_IN_FLIGHT]
        _WRITES_CUT.clear()  # told once
        return found
