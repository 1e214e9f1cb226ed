"""A function run in a child process forked for it, its result handed back pickled.

Reading a bot's local code is CPU work in Python. In a thread it shares the interpreter's lock with the main
thread, which meanwhile imports the HTTP client, reads the ledgers and parses the servers' answers; forked before
that, the read runs beside them on another core. Only on Linux (the result travels through an anonymous in-memory
file) and only while the process has a single thread (a fork copies the locks other threads might hold); elsewhere
:meth:`ForkedCall.start` answers ``None`` and the caller does the work itself.

The child never hands back an error nor writes to the terminal: whatever goes wrong there, :meth:`ForkedCall.result`
answers ``None`` and the caller does the work again, so its error is raised and worded exactly as before. The child
dies with its parent and is always collected. The parent may tell it one thing learnt after the fork
(:meth:`ForkedCall.tell`), and the child may write a preface before its result (:meth:`ForkedCall.preface`), which
the parent can start on while the result is still pickled. Not ``multiprocessing``: its fork machinery costs an
import, and its other start methods start a fresh interpreter that imports the tool again.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import select
import signal
import struct
import sys
import threading
from collections.abc import Callable
from typing import Generic, NoReturn, TypeVar

T = TypeVar("T")

#: ``prctl`` option: the signal the kernel sends a process when its parent dies.
_PR_SET_PDEATHSIG = 1
#: What the child writes to its ``ready`` pipe once its result is in the file.
_DONE = b"\x01"
#: What a child with a preface writes to its ``ready`` pipe once the preface is in the file (before its result).
_PREFACED = b"\x02"
#: What the parent notes when the ``ready`` pipe ended without :data:`_DONE`: the child failed or was killed.
_FAILED = b""
#: The file's first bytes: the length of the preface that follows (then the pickled result). Also the length
#: before the message the parent tells the child.
_HEADER = struct.Struct(">Q")


def can_fork() -> bool:
    """Whether :meth:`ForkedCall.start` would fork now: on Linux, in a process with a single thread."""
    return sys.platform.startswith("linux") and hasattr(os, "memfd_create") and threading.active_count() == 1


class ForkedCall(Generic[T]):
    """``work()`` running in a child process; :meth:`result` is its return value, or ``None`` if it failed.

    The child says it is done through a pipe (one byte, after its result is written), so the result is taken
    without waiting for the child's exit, whose teardown of a large address space takes milliseconds; the child is
    collected afterwards (:meth:`collect`). With ``preface``, the child also writes ``preface(result, told)``, bytes
    that :meth:`preface` hands over before the result is unpickled (what the caller can start on at once); ``told``
    is what the parent said with :meth:`tell`, or ``None`` when it said nothing.

    One thread reads what the child wrote (:meth:`preface`, then :meth:`result`); another may :meth:`cancel`."""

    def __init__(self, pid: int, result_fd: int, ready_fd: int, told_fd: int = -1) -> None:
        self.pid = pid
        self._fds = (ready_fd, result_fd)  # until the reader takes them (or cancel closes them)
        self._told = told_fd  # the parent's end of the pipe for tell(), until it is closed
        self._taken: tuple[int, int] | None = None
        self._said = b""  # the last stage read from the ready pipe: _PREFACED, _DONE or _FAILED (b"": nothing yet)
        self._ended = False  # whether _said is final (_DONE or _FAILED)
        self._lock = threading.Lock()
        self._listening = threading.Lock()  # held by the one thread reading the ready pipe
        self._collected = False
        self._pidfd: int | None = None
        try:  # signals sent through it never reach another process that reused the pid
            self._pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None

    @classmethod
    def start(
        cls, work: Callable[[], T], preface: Callable[[T, bytes | None], bytes] | None = None
    ) -> ForkedCall[T] | None:
        """Fork a child that runs ``work`` (and ``preface`` of its result and of what it is told); ``None``
        (nothing forked) where :func:`can_fork` says no or the system refuses."""
        if not can_fork():
            return None
        opened: list[int] = []
        try:
            opened.append(os.memfd_create("gitops-result", os.MFD_CLOEXEC))  # closed in what the child executes
            opened += os.pipe2(os.O_CLOEXEC)  # ready: child to parent
            if preface is not None:
                opened += os.pipe2(os.O_CLOEXEC)  # told: parent to child
        except OSError:
            for end in opened:
                os.close(end)
            return None
        fd, ready_r, ready_w, *told = opened
        told_r, told_w = told or (-1, -1)
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            for end in opened:
                os.close(end)
            return None
        if pid == 0:
            for end in (ready_r, told_w):
                if end >= 0:
                    os.close(end)
            _child(work, preface, fd, ready_w, told_r, parent)
        for end in (ready_w, told_r):
            if end >= 0:
                os.close(end)
        return cls(pid, fd, ready_r, told_w)

    def tell(self, message: bytes) -> None:
        """Hand ``message`` to the child's preface (once; later calls, and calls after the parent began to wait for
        the child, are ignored). Never blocks: a message the pipe cannot take at once (about 64 KiB) reaches the
        child cut short, and the child then takes it as nothing told."""
        fd = self._close_told(keep=True)
        if fd < 0:
            return
        try:
            os.set_blocking(fd, False)
            os.write(fd, _HEADER.pack(len(message)) + message)
        except OSError:
            pass
        finally:
            os.close(fd)

    def ready(self) -> bool:
        """Whether :meth:`result` would answer at once (the child is done, or gone); ``False`` while another thread
        waits for the child (:meth:`preface`). A child with a preface is done only once it was told (:meth:`tell`)
        or the parent began to wait for it."""
        with self._lock:
            fd = self._fds[0] if self._taken is None else self._taken[0]
        if fd < 0 or self._ended:
            return True
        if not self._listening.acquire(blocking=False):
            return False
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            while not self._ended and poller.poll(0):
                self._hear(fd)
            return self._ended
        finally:
            self._listening.release()

    def preface(self) -> bytes | None:
        """Wait until the child wrote its preface (or is done); the bytes of ``preface`` (empty without one), or
        ``None`` when it did not end well (or was cancelled, or the result was taken)."""
        fd = self._finished(preface=True)
        return _section(fd, preface=True) if fd >= 0 else None

    def result(self) -> T | None:
        """Wait until the child is done; what ``work`` returned, or ``None`` when it did not end well (or was
        cancelled, or the result was taken already). The child's files are closed after it."""
        try:
            fd = self._finished()
            data = _section(fd, preface=False) if fd >= 0 else None
        finally:
            self._release()
        self._collect(block=False)
        if data is None:
            return None
        try:
            # Written by our own child into a file only the two processes hold (no name, no path to it).
            value: T = pickle.loads(data)  # noqa: S301
        except Exception:  # a torn file: the caller does the work itself
            return None
        return value

    def collect(self) -> None:
        """Wait for the child's exit (it is done or ending) and collect it; its files are closed if the caller
        stopped before taking the result (no other thread may be waiting for the child then). Once is enough, more
        is harmless."""
        self._release()
        self._collect(block=True)

    def cancel(self) -> None:
        """Kill the child (if it still runs), collect it and drop its result."""
        with self._lock:
            if not self._collected:
                try:
                    if self._pidfd is not None:
                        signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                    else:
                        os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            fds = [fd for fd in self._fds if fd >= 0]
            self._fds = (-1, -1)
        for fd in fds:  # not taken by the reader: nobody reads them now
            os.close(fd)
        self._close_told()
        self._collect(block=True)

    def _close_told(self, *, keep: bool = False) -> int:
        """Close the parent's end of the told pipe (the child reads nothing told), or with ``keep`` hand it to
        the caller, who closes it; -1 when it is closed already."""
        with self._lock:
            fd, self._told = self._told, -1
        if fd >= 0 and not keep:
            os.close(fd)
            return -1
        return fd

    def _finished(self, *, preface: bool = False) -> int:
        """The result file once the child is done (with ``preface``: once its preface is written); -1 when it
        failed, was cancelled, or the result was taken."""
        self._close_told()  # a child waiting to be told is told nothing, instead of waiting for this wait to end
        with self._lock:
            if self._taken is None:
                self._taken, self._fds = self._fds, (-1, -1)
            ready_fd, result_fd = self._taken
        if ready_fd < 0 or result_fd < 0:
            return -1
        with self._listening:
            while not self._ended and not (preface and self._said == _PREFACED):
                self._hear(ready_fd)
        return result_fd if self._said == _DONE or (preface and self._said == _PREFACED) else -1

    def _hear(self, ready_fd: int) -> None:
        """Read the child's next word (blocking; the caller holds ``_listening``). The end of the pipe, or a byte
        that is not a stage, means the child failed."""
        said = os.read(ready_fd, 1)
        self._said = said if said in (_PREFACED, _DONE) else _FAILED
        self._ended = self._said != _PREFACED

    def _release(self) -> None:
        """Close the child's result file and ``ready`` pipe, taken by a reader or not (each once)."""
        with self._lock:
            left = [fd for fd in (*(self._taken or ()), *self._fds) if fd >= 0]
            self._taken, self._fds = (-1, -1), (-1, -1)
        for fd in left:
            os.close(fd)

    def _collect(self, *, block: bool) -> None:
        with self._lock:
            if self._collected:
                return
        try:
            pid, _ = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # collected by the other thread meanwhile (cancel beside the worker)
            pid = self.pid
        if pid == 0:
            return  # still ending: collect() takes it later
        with self._lock:
            self._collected = True
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None


def _section(fd: int, *, preface: bool) -> bytes | None:
    """The preface the child wrote, or (``preface`` false) the pickled result after it; ``None`` for a file shorter
    than its header says (the caller then does the work itself, as for any other failure of the child)."""
    try:
        (size,) = _HEADER.unpack(_read_at(fd, 0, _HEADER.size))
        if preface:
            return _read_at(fd, _HEADER.size, size)
        start = _HEADER.size + size
        return _read_at(fd, start, os.fstat(fd).st_size - start)
    except OSError:
        return None


def _read_at(fd: int, offset: int, size: int) -> bytes:
    parts: list[bytes] = []
    while size > 0:
        part = os.pread(fd, size, offset)
        if not part:
            raise OSError("the child's result file is shorter than it says")
        parts.append(part)
        offset += len(part)
        size -= len(part)
    return b"".join(parts)


def _write_all(fd: int, *chunks: bytes) -> None:
    for chunk in chunks:
        data = memoryview(chunk)
        while data:
            data = data[os.write(fd, data) :]


def _child(
    work: Callable[[], T],
    preface: Callable[[T, bytes | None], bytes] | None,
    fd: int,
    ready: int,
    told: int,
    parent: int,
) -> NoReturn:
    """The child's whole life: run, read what it is told, write the preface and the pickled result, say so on
    ``ready``, exit 0; anything else exits 1 (and ``ready`` reads as closed)."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _die_with_parent()
        if os.getppid() != parent:  # the parent died before the line above took effect
            os._exit(1)
        result = work()
        if preface is not None:
            first = preface(result, _told(told))
            _write_all(fd, _HEADER.pack(len(first)), first)
            os.write(ready, _PREFACED)
            del first
        else:
            _write_all(fd, _HEADER.pack(0))
        _write_all(fd, pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        os.write(ready, _DONE)
        code = 0
    except BaseException:  # noqa: S110 - the parent does the work again and reports its error
        pass
    finally:
        os._exit(code)


def _told(fd: int) -> bytes | None:
    """What the parent told (read until it closes its end); ``None`` for nothing told or a message cut short."""
    parts: list[bytes] = []
    while part := os.read(fd, 1 << 16):
        parts.append(part)
    data = b"".join(parts)
    if len(data) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(data[: _HEADER.size])
    return data[_HEADER.size :] if len(data) == _HEADER.size + size else None


def _die_with_parent() -> None:
    # Where it cannot be asked, the child still ends when its work does.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
