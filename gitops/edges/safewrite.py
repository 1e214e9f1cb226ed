"""Writing a file under a folder so that no symbolic link can carry the write elsewhere.

A pull writes names chosen by the server under a branch's root. Checking the path first and writing it later leaves
a window: a folder on the way swapped for a link between the check and the write would receive the file wherever
the link points. Here every folder on the way is opened relative to the one before it, with ``O_NOFOLLOW`` (a link
is refused, not followed), created when missing; the file is written to a new temporary name in the last one
(``O_EXCL | O_NOFOLLOW``), synced, and renamed over the target relative to that same open folder. Whatever is swapped
meanwhile, the bytes land in the folders that were opened, or nowhere. POSIX only (``dir_fd``); elsewhere the plain
path is used, after the pull's own checks.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_SUPPORTED = os.open in os.supports_dir_fd and os.mkdir in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")


class LinkInTheWay(OSError):
    """A folder on the way is a symbolic link (or not a folder)."""


def write_under(root: Path, relative: str, data: bytes) -> None:
    """Write ``data`` to ``root/relative`` (``/`` separators) whole or not at all, never through a link below
    ``root``; an existing file keeps its mode. :class:`LinkInTheWay` (an ``OSError``) when a folder on the way is a
    link; any other ``OSError`` as the system raises it."""
    *folders, name = relative.split("/")
    root.mkdir(parents=True, exist_ok=True)  # the branch's root, checked by the caller to lie in the repository
    if not _SUPPORTED:  # pragma: no cover - Windows
        _write_plain(root.joinpath(*folders), name, data)
        return
    fd = os.open(root, _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))  # the root itself was checked by the caller
    try:
        for folder in folders:
            inner = _enter(fd, folder)
            os.close(fd)
            fd = inner
        _write_at(fd, name, data)
    finally:
        os.close(fd)


def _enter(parent: int, name: str) -> int:
    """The folder ``name`` inside ``parent``, opened without following a link (created when missing)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=parent)
        return _enter_existing(parent, name)
    except OSError:
        return _enter_existing(parent, name)


def _enter_existing(parent: int, name: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a folder"
            raise LinkInTheWay(exc.errno, f"{name} is {what}") from None
        raise


def _write_at(folder: int, name: str, data: bytes) -> None:
    mode = 0o666
    with contextlib.suppress(OSError):
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise LinkInTheWay(0, f"{name} is a symbolic link")
        mode = info.st_mode & 0o7777  # keep an existing file's mode (an executable stays executable)
    temp = f".{name[:100]}.gitops-pull-{secrets.token_hex(4)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=folder)


def _write_plain(folder: Path, name: str, data: bytes) -> None:  # pragma: no cover - Windows
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    temp = folder / f".{name[:100]}.gitops-pull-{secrets.token_hex(4)}"
    with open(temp, "xb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    try:
        os.replace(temp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
