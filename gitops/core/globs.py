"""The manifest's globs (``include``, ``exclude``, ``binary``): how they match a path, and where they could reach.

Matching is wcmatch's, with the flags of :func:`glob_flags`, so that a glob means in the tool what it means in the
library's documentation. The questions about folders (:func:`glob_reaches_into`, :func:`may_hold_modules`) are for
what an edge could not list: a folder the globs could reach is refused rather than left out, because a module left
out is removed from the server by the next upload. Only the building of a branch (:mod:`gitops.core.branchbuild`)
and pull import this module, never a plan's parent process that takes the code its forked read made.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import bracex
from wcmatch import fnmatch as wcfnmatch
from wcmatch import glob as wcglob

from gitops.config.manifest import BranchConfig


def glob_flags() -> int:
    """wcmatch's flags for the manifest's globs: ``**`` spans folders; ``{a,b}`` alternatives; ``/`` separators and
    case-sensitive matching on every platform. ``*`` does not match a leading dot (as in a shell): a module name
    starting with ``.`` would be dropped anyway."""
    return wcglob.GLOBSTAR | wcglob.BRACE | wcglob.FORCEUNIX


def matcher(patterns: list[str]) -> Callable[[str], bool]:
    """Whether a path matches one of ``patterns`` (and none of their exclusions), as ``wcglob.compile(patterns,
    flags=glob_flags()).match(path)`` says. The library's own regular expressions (``wcglob.translate``), matched here
    directly: its matcher object adds checks to every call, and the local read calls it for every file."""
    if not patterns:
        return lambda _path: False
    include, exclude = wcglob.translate(patterns, flags=glob_flags())
    included = re.compile("|".join(f"(?:{p})" for p in include)).fullmatch
    if not exclude:
        return lambda path: included(path) is not None
    excluded = re.compile("|".join(f"(?:{p})" for p in exclude)).fullmatch
    return lambda path: included(path) is not None and excluded(path) is None


def _alternatives(pattern: str) -> list[list[str]]:
    """The ``/``-separated parts of each alternative of a glob (``{a,b}`` expanded)."""
    try:
        expanded = bracex.expand(pattern)
    except bracex.ExpansionLimitException:
        expanded = ["**"]  # too many to look at: assume it reaches everywhere
    return [alternative.split("/") for alternative in expanded]


def _part_matches(name: str, part: str) -> bool:
    return bool(wcfnmatch.fnmatch(name, part, flags=wcfnmatch.FORCEUNIX))


def _reaches_into(parts: list[str], folder: list[str]) -> bool:
    """Whether a glob (its parts) could match some file under ``folder``, as ``glob_flags()`` match: ``**`` spans
    folders but not ones whose names start with a dot. Errs on yes."""
    if not folder:
        return bool(parts)
    if not parts:
        return False
    if parts[0] == "**":
        return _reaches_into(parts[1:], folder) or (not folder[0].startswith(".") and _reaches_into(parts, folder[1:]))
    return _part_matches(folder[0], parts[0]) and _reaches_into(parts[1:], folder[1:])


def _matches_whole(parts: list[str], folder: list[str]) -> bool:
    """Whether a glob (its parts) matches the path ``folder`` itself."""
    if not parts:
        return not folder
    if parts[0] == "**":
        return _matches_whole(parts[1:], folder) or (
            bool(folder) and not folder[0].startswith(".") and _matches_whole(parts, folder[1:])
        )
    return bool(folder) and _part_matches(folder[0], parts[0]) and _matches_whole(parts[1:], folder[1:])


def glob_reaches_into(pattern: str, folder: str) -> bool:
    """Whether ``pattern`` could match some file under ``folder`` (relative to the root). Errs on yes."""
    names = folder.split("/") if folder else []
    return any(_reaches_into(parts, names) for parts in _alternatives(pattern))


def may_hold_modules(folder: str, config: BranchConfig) -> bool:
    """Whether files under ``folder`` (relative to the root) could be modules of the branch. Errs on yes: a folder
    whose files cannot be listed is harmless only when include cannot reach into it, or an exclude of the form
    ``folder/**`` (or one of its parents) leaves out all of it."""
    names = folder.split("/") if folder else []
    includes = [parts for pattern in config.include for parts in _alternatives(pattern)]
    if not any(_reaches_into(parts, names) for parts in includes):
        return False
    if any(part.startswith(".") for parts in includes for part in parts):
        return True  # include names hidden files, which an exclude's ``**`` does not cover
    for pattern in config.exclude:
        for parts in _alternatives(pattern):
            if parts[-1] != "**":
                continue
            for k in range(len(names) + 1):
                if _matches_whole(parts[:-1], names[:k]) and not any(n.startswith(".") for n in names[k:]):
                    return False
    return True
