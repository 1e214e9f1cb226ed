"""Request bodies deflated once per run, and ahead of time when the work can hide behind a wait (issue 23).

An upload's body is the same bytes for every server that gets the same branch name and modules (one bot deployed to
the official world, a season and a private server), and deflating a large bot costs real time: :func:`deflated`
deflates each body once, computing it or waiting for the thread that already is. :class:`BackgroundDeflates` starts
that work in background threads while the run waits for something else (the compression probe's answer, the plan's
output); zlib releases the interpreter lock, so the work runs beside the waiting thread on another core.

A large body is deflated in parts at once, one per core (at most :data:`MOST_PARTS`), pigz's way: each part after the
first starts from the 32 KiB before it (a preset window), each but the last ends with a sync flush, and the parts
joined under one zlib header and the whole body's Adler-32 make one ordinary zlib stream that any inflater reads.
The deflate is zlib-ng's where it is installed (:func:`library`), else the standard library's. The memo holds at
most :data:`KEPT` bodies (the newest), keyed by their bytes, for one process (``gitops watch`` uploads new bodies as
files change; the bound keeps it small).
"""

from __future__ import annotations

import contextlib
import os
import threading
import zlib
from collections import OrderedDict
from functools import cache, partial
from typing import TYPE_CHECKING

from gitops.edges.threads import Background, start_quiet

if TYPE_CHECKING:
    from types import ModuleType

#: Level 5: on bot-like JavaScript it sends clearly fewer bytes than level 4 for a little more CPU (halved by the
#: parts on two cores), which an ordinary uplink wins back; level 6 costs much more for little (bench/README.md).
COMPRESS_LEVEL = 5
#: The smallest request body worth compressing: below it the bytes saved do not pay for the work (a few packets).
COMPRESS_MIN_BYTES = 64 * 1024
#: A body is cut into parts of at least this many bytes, deflated at once (see the module's docstring).
PART_BYTES = 1 << 20
#: At most this many parts (and threads) per body; fewer on a machine with fewer cores.
MOST_PARTS = 4
#: What zlib writes before the deflate stream at :data:`COMPRESS_LEVEL` (the method, window and level bits).
_HEADER = zlib.compress(b"", COMPRESS_LEVEL)[:2]  # the same two bytes from zlib-ng
#: The deflate window: a part's compressor is given the bytes before it, up to this many.
_WINDOW = 32 * 1024
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


@cache
def library() -> ModuleType:
    """zlib-ng's ``zlib_ng`` module, imported at the first deflate (not before a run's first request), or the
    standard ``zlib`` where it is not installed.

    zlib-ng's deflate writes the same zlib format with less CPU and fewer bytes at the same level
    (:data:`COMPRESS_LEVEL`), and like zlib it works without the interpreter lock. pyproject.toml installs it on the
    machines PyPI has its wheels for; elsewhere the standard zlib does the work."""
    try:
        from zlib_ng import zlib_ng  # noqa: PLC0415 (boundary: zlib-ng)
    except ImportError:
        return zlib
    return zlib_ng


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


def _part(content: bytes, start: int, end: int) -> bytes:
    """Raw deflate of ``content[start:end]`` that continues the stream of the bytes before it (see the module)."""
    window = content[max(0, start - _WINDOW) : start]
    packer = (
        library().compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY, window)
        if window
        else library().compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    )
    last = end >= len(content)
    packed: bytes = packer.compress(memoryview(content)[start:end])
    tail: bytes = packer.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)
    return packed + tail


def _deflate(content: bytes) -> bytes:
    """``content`` as one zlib stream (what ``library().compress`` gives, byte for byte for a small body); a large body
    in parts at once, one in this thread and the others in helper threads (zlib works without the interpreter
    lock)."""
    parts = min(MOST_PARTS, os.cpu_count() or 1, len(content) // PART_BYTES)
    if parts < 2:
        whole: bytes = library().compress(content, COMPRESS_LEVEL)
        return whole
    size = -(-len(content) // parts)
    cuts = [(start, min(start + size, len(content))) for start in range(0, len(content), size)]
    helpers = [Background(partial(_part, content, start, end), name="gitops-deflate-part") for start, end in cuts[1:]]
    try:
        first = _part(content, *cuts[0])
    finally:
        for helper in helpers:
            helper.join()
    return b"".join([_HEADER, first, *(h.result() for h in helpers), zlib.adler32(content).to_bytes(4, "big")])


def _compute(content: bytes, entry: _Entry) -> bytes:
    try:
        entry.result = _deflate(content)
        return entry.result
    finally:
        entry.ready.set()


def _compute_quietly(content: bytes, entry: _Entry) -> None:
    # Out of memory in the background: the entry says it failed, and deflated() tries again where it is needed.
    with contextlib.suppress(MemoryError):
        _compute(content, entry)


def deflated(content: bytes) -> bytes:
    """``content`` deflated (zlib format, :data:`COMPRESS_LEVEL`): computed here, or taken from (or waited for
    from) a run of this function or of :class:`BackgroundDeflates` on the same bytes."""
    entry, mine = _claim(content)
    if mine:
        return _compute(content, entry)
    entry.ready.wait()
    if entry.result is not None:
        return entry.result
    return _deflate(content)  # the other computation failed (out of memory): try here


class BackgroundDeflates:
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


def deflate_ahead_body(ahead: BackgroundDeflates, content: bytes) -> None:
    """Have ``ahead`` deflate a request body (its bytes) that will be sent compressed; nothing for one below
    :data:`COMPRESS_MIN_BYTES` (sent as it is)."""
    if len(content) >= COMPRESS_MIN_BYTES:
        ahead.start(content)
