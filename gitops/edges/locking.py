"""The ledger's lock file: one run at a time per state file, released by the system when the process dies.

On POSIX this is ``flock`` on the lock file, called directly: the same call the ``filelock`` library makes there,
whose import every run would otherwise pay before its first request (a speed issue, 23, measured it). Elsewhere
(Windows) the library does it (``msvcrt`` locking), imported only there: the one lazy import of this module, at the
boundary the architecture document names for it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Protocol

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: Whether locks are ``flock`` calls made here (POSIX) rather than the filelock library's.
HAS_FLOCK = fcntl is not None


class LockTimeout(Exception):
    """The lock stayed held by another process for the whole wait."""


class FileLock(Protocol):
    def acquire(self, timeout: float, poll_interval: float = 0.05) -> None:
        """Take the lock, waiting up to ``timeout`` seconds; :class:`LockTimeout` if it is still held then,
        ``OSError`` if the file cannot be opened or locked at all."""

    def release(self) -> None:
        """Give the lock back (nothing if it is not held)."""


class _Flock:
    """An exclusive ``flock`` on ``path`` (created 0644 if missing), held while its descriptor is open."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def acquire(self, timeout: float, poll_interval: float = 0.05) -> None:
        if self._fd is not None:
            return
        assert fcntl is not None
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
            except BaseException:
                os.close(fd)
                raise
            else:
                self._fd = fd
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise LockTimeout(str(self._path))
            time.sleep(min(poll_interval, left))

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor of the open file releases its flock


class _Library:
    """The ``filelock`` library's lock, where there is no ``flock``."""

    def __init__(self, path: Path) -> None:
        import filelock  # noqa: PLC0415 (boundary: filelock on Windows)

        self._lock = filelock.FileLock(path)
        self._timeout: type[Exception] = filelock.Timeout

    def acquire(self, timeout: float, poll_interval: float = 0.05) -> None:
        try:
            self._lock.acquire(timeout=timeout, poll_interval=poll_interval)
        except self._timeout:
            raise LockTimeout(str(self._lock.lock_file)) from None

    def release(self) -> None:
        self._lock.release()


def file_lock(path: Path) -> FileLock:
    """A lock on ``path`` for this process (not taken yet)."""
    return _Flock(path) if HAS_FLOCK else _Library(path)
