"""Reading an input file and naming places in it, without YAML (``gitops.config.yamlload`` parses).

The manifest's classes (:mod:`gitops.config.model`) and its loading up to the cache lookup use this module, and a
manifest found in the validated-manifest cache is never validated: so nothing here may import pyyaml or pydantic.
:mod:`gitops.config.yamlload` re-exports all of it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TypeAlias

#: The largest file read: each of them needs a few kilobytes; a bigger one is refused before it is parsed.
MAX_FILE_BYTES = 1024 * 1024

#: A key path: ``("branches", 0, "include", 1)``.
Loc: TypeAlias = tuple[str | int, ...]

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


# --- key paths -------------------------------------------------------------------------------------------------


def format_loc(loc: Loc) -> str:
    """``branches[0].include[1]``, ``servers.local.url``, ``budget.reserve["POST /api/user/code"]``."""
    out = ""
    for part in _named(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out or "(top level)"


def _named(loc: Loc) -> Loc:
    # A key the file wrote as a date, a float or null reaches a path (through pydantic) as that value: named as
    # text, as the data builder records it.
    if all(isinstance(part, str | int) for part in loc):
        return loc
    return tuple(part if isinstance(part, str | int) else str(part) for part in loc)


def line_of(locations: Mapping[Loc, int], loc: Loc) -> int:
    """The line of ``loc``, or of the nearest enclosing key that exists in the file (1 for none)."""
    loc = _named(loc)
    for end in range(len(loc), -1, -1):
        line = locations.get(loc[:end])
        if line is not None:
            return line
    return 1


def counted(problems: list[str]) -> str:
    """``1 problem``, ``3 problems``: for the first line of an error listing them."""
    return f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"


# --- reading a file ---------------------------------------------------------------------------------------------


class Unreadable(Exception):
    """A file that cannot be checked at all (too large, not UTF-8, not YAML, anchors...): ``problems`` lists why,
    each line starting with ``file:line`` (and the column where YAML gives one)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems)
        self.problems = problems


def size_text(size: int) -> str:
    """``8,388,608 bytes (8.0 MB)``."""
    return f"{size:,} bytes ({size / 1024 / 1024:.1f} MB)"


def read_capped(path: Path, display: str, *, limit: int = MAX_FILE_BYTES, what: str = "this file") -> bytes:
    """The bytes of ``path``, refusing a file over ``limit`` bytes before reading it (``OSError`` passes through).

    Only a regular file is read: a FIFO, a device or a socket is refused at once (its ``open`` or ``read`` could
    wait forever for a writer). It is opened with ``O_NONBLOCK``, so that not even the ``open`` of a FIFO swapped in
    after the check waits, and checked again on the open file."""
    kind = _not_regular(os.stat(path).st_mode)
    if kind is not None:
        raise Unreadable([f"{display}:1: {display} is {kind}, not a regular file; {what} must be a file"])
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(stream.fileno())
        kind = _not_regular(info.st_mode)
        if kind is not None:
            raise Unreadable([f"{display}:1: {display} is {kind}, not a regular file; {what} must be a file"])
        size = info.st_size
        raw = b"" if size > limit else stream.read(limit + 1)  # a pipe or a growing file has no reliable size
    if size > limit or len(raw) > limit:
        shown = size_text(size) if size > limit else f"more than {limit:,} bytes"
        raise Unreadable(
            [
                f"{display}:1: the file is {shown}, and {what} may have at most {size_text(limit)}; it was not "
                "read: check that this is the right file"
            ]
        )
    return raw


def _not_regular(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file ("a FIFO (named pipe)"), else ``None``."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"
