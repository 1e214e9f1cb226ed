"""Request bodies deflated once per run, and ahead of time when the work can hide behind a wait (issue 23).

An upload's body is the same bytes for every server that gets the same branch name and modules (one bot deployed to
the official world, a season and a private server), and deflating it costs tens of milliseconds per 4.7 MB. Here it
is deflated once: :func:`deflated` returns the deflated bytes of a body, computing them or waiting for the thread
that already is. :class:`Ahead` starts that work in a background thread while the run waits for something else (the
compression probe's answer, the plan's output); zlib releases the interpreter lock while it works, so the work runs
beside the waiting thread on another core.

The memo holds at most :data:`KEPT` bodies (the newest), keyed by the body's bytes: equal bytes, equal deflate. It
is per process, which is one run (``gitops watch`` uploads new bodies as files change; the bound keeps it small).
"""

from __future__ import annotations

import contextlib
import threading
import zlib
from collections import OrderedDict

from gitops.edges.threads import start_quiet

#: zlib level 4: Screeps code (the game engine's own JavaScript, 4.7 MB) deflates 5.9 times in about 50 ms; level 1
#: gives 4.8x in 35 ms, level 6 6.5x in 100 ms. Level 4 is the quickest whole upload from 20 to 100 Mbit/s up.
COMPRESS_LEVEL = 4
#: How many bodies' deflates are remembered (the newest): a run's uploads are one body per branch.
KEPT = 4


class _Entry:
    """One body's deflate: done when ``ready`` is set (``result`` is then the bytes, or ``None`` if it failed)."""

    __slots__ = ("ready", "result")

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.result: bytes | None = None


_lock = threading.Lock()
_memo: OrderedDict[bytes, _Entry] = OrderedDict()


def _claim(content: bytes) -> tuple[_Entry, bool]:
    """The entry of ``content`` and whether the caller must compute it (nobody else is)."""
    with _lock:
        entry = _memo.get(content)
        if entry is not None and (entry.result is not None or not entry.ready.is_set()):
            _memo.move_to_end(content)
            return entry, False
        entry = _Entry()
        _memo[content] = entry
        while len(_memo) > KEPT:
            _memo.popitem(last=False)
        return entry, True


def _compute(content: bytes, entry: _Entry) -> bytes:
    try:
        entry.result = zlib.compress(content, COMPRESS_LEVEL)
        return entry.result
    finally:
        entry.ready.set()


def _compute_quietly(content: bytes, entry: _Entry) -> None:
    # Out of memory in the background: the entry says it failed, and deflated() tries again where it is needed.
    with contextlib.suppress(MemoryError):
        _compute(content, entry)


def deflated(content: bytes) -> bytes:
    """``content`` deflated (zlib format, :data:`COMPRESS_LEVEL`): computed here, or taken from (or waited for
    from) a run of this function or of :class:`Ahead` on the same bytes."""
    entry, mine = _claim(content)
    if mine:
        return _compute(content, entry)
    entry.ready.wait()
    if entry.result is not None:
        return entry.result
    return zlib.compress(content, COMPRESS_LEVEL)  # the other computation failed (out of memory): try here


class Ahead:
    """Deflates bodies in background threads, so that a later :func:`deflated` of the same bytes finds them done;
    :meth:`join` waits for every thread it started (the owner calls it when it closes)."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []

    def start(self, content: bytes) -> None:
        """Begin deflating ``content`` unless it is done or under way."""
        entry, mine = _claim(content)
        if not mine:
            return
        thread = threading.Thread(target=_compute_quietly, args=(content, entry), name="gitops-deflate", daemon=True)
        start_quiet(thread)
        self._threads.append(thread)

    def join(self) -> None:
        for thread in self._threads:
            thread.join()
        self._threads.clear()
