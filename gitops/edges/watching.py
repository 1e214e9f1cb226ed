"""File changes from watchfiles: the :class:`~gitops.app.watch.ChangeSource` of ``gitops watch``.

The use case decides what a change means (:func:`gitops.app.watch.classify`); this edge only reports which files
changed, from one inotify (or polling) watcher over the manifest's folder, closed when the block ends. watchfiles
is the optional extra ``serve``'s: ``gitops watch`` checks that it is installed before it imports this module.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import watchfiles

#: Changes closer together than this (milliseconds) arrive as one set; the use case debounces further.
_GROUP_MS = 100


class FileChanges:
    """A :class:`gitops.app.watch.ChangeSource` over ``watchfiles.watch`` (its default filter leaves out ``.git``,
    ``node_modules``, editor swap files). ``timeout`` is fixed at creation (watchfiles' ``rust_timeout``)."""

    def __init__(self, folder: Path, timeout: float, stop: threading.Event) -> None:
        self._stop = stop
        self._changes: Generator[set[tuple[Any, str]], None, None] = watchfiles.watch(
            folder,
            debounce=_GROUP_MS * 4,
            step=_GROUP_MS,
            rust_timeout=max(1, int(timeout * 1000)),
            yield_on_timeout=True,
            stop_event=stop,
            raise_interrupt=True,
        )

    def changes(self, timeout: float) -> set[Path]:
        """The paths changed since the last call (waits at most the timeout given at creation)."""
        try:
            return {Path(path) for _, path in next(self._changes)}
        except StopIteration:  # the stop event was set
            self._stop.set()
            return set()

    def close(self) -> None:
        self._changes.close()


@contextmanager
def file_changes(folder: Path, timeout: float, stop: threading.Event | None = None) -> Iterator[FileChanges]:
    """A :class:`FileChanges` over ``folder``, its watcher closed when the block ends."""
    source = FileChanges(folder, timeout, stop or threading.Event())
    try:
        yield source
    finally:
        source.close()
