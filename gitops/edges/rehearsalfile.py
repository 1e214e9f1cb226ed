"""Rehearsal result files at the rim: written by the job that rehearsed (``gitops rehearse --result-out``, the
Action's ``rehearsal-file`` output), read by the job that comments (:mod:`gitops.core.rehearsalresult` says what the
file holds and why it is data, never Markdown)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from gitops.core.rehearsalresult import RehearsalResult, ResultProblem, result_data, result_from_data
from gitops.edges.outfile import write_out
from gitops.errors import SourceError

#: How messages name the file.
WHAT = "rehearsal result file"
#: The most bytes read: 500 branches of two sides of 10,000 ticks' CPU figures fit in far less.
MAX_BYTES = 64 * 1024 * 1024

_HINT = (
    "Hand on the file the rehearse job wrote (its rehearsal-file output, `gitops rehearse --result-out FILE`) "
    "unchanged, with the same gitops version."
)


def write_result(path: Path, result: RehearsalResult) -> None:
    """Write the result to ``path`` (a new or regular file, replaced atomically: :mod:`gitops.edges.outfile`)."""
    write_out(path, json.dumps(result_data(result), ensure_ascii=True, separators=(",", ":")), what=WHAT)


def read_result(path: Path) -> RehearsalResult:
    """The checked result in the file at ``path``; :class:`SourceError` (exit 6) naming what is wrong."""
    where = f"the {WHAT} {path}"
    try:
        # O_NONBLOCK: a FIFO put in the file's place is refused below, never waited on.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise SourceError(f"{where} cannot be read ({exc.strerror})", hint=_HINT) from None
    with os.fdopen(fd, "rb") as stream:
        facts = os.fstat(fd)
        if not stat.S_ISREG(facts.st_mode):
            raise SourceError(f"{where} is not a regular file", hint=_HINT)
        if facts.st_size > MAX_BYTES:
            raise SourceError(f"{where} is {facts.st_size:,} bytes, more than any rehearsal writes", hint=_HINT)
        raw = stream.read(MAX_BYTES + 1)
    try:
        return result_from_data(json.loads(raw))
    except (ValueError, RecursionError) as exc:
        detail = str(exc) if isinstance(exc, ResultProblem) else "is not JSON"
        raise SourceError(f"{where} {detail}", hint=_HINT) from None


__all__ = ["WHAT", "read_result", "write_result"]
