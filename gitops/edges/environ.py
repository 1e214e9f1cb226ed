"""Keeping this process's credentials out of reach of the programs it starts (a ``build:`` command).

A child started without a variable still finds it in its parent: on Linux ``/proc/$PPID/environ`` shows the block
of ``NAME=value`` strings the parent was started with, readable by any process of the same user, whatever the
parent later removed from ``os.environ`` (Python's copy). Before a build runs, :func:`seal_process` therefore
overwrites, in that block (this process's own memory, between ``env_start`` and ``env_end`` of
``/proc/self/stat``), the values of the named variables with zero bytes, while ``os.environ`` keeps its copy; and
marks the process not dumpable (``prctl(PR_SET_DUMPABLE, 0)``), so that another process of the same user needs
``CAP_SYS_PTRACE`` to read its memory or environment at all. Root has that, which is why the first measure matters.

Linux only; elsewhere both are skipped (macOS has no ``/proc``; ``ps -E`` there shows only the environment the
process was started with, so the documented rule stands: run builds where the secret is not in the environment,
e.g. the GitHub Action's build step). It never raises: a failure leaves the process as it was and says so.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterable

#: ``prctl`` option: whether the process may be dumped and ptrace-attached by others of its user.
_PR_SET_DUMPABLE = 4


def _env_block() -> tuple[int, int] | None:
    """Start and end address of this process's initial environment (``/proc/self/stat``, fields 50 and 51)."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": field 3 (state) is fields[0]
    try:
        return int(fields[47]), int(fields[48])
    except (IndexError, ValueError):
        return None


def scrub_environment_block(names: Iterable[str]) -> list[str]:
    """Overwrite the values of ``names`` in this process's initial environment block; the names scrubbed."""
    if not sys.platform.startswith("linux"):
        return []
    wanted = {name.encode("utf-8", "surrogateescape") for name in names}
    block = _env_block()
    if not wanted or block is None or block[1] <= block[0]:
        return []
    start, end = block
    data = ctypes.string_at(start, end - start)
    scrubbed: list[str] = []
    offset = 0
    for entry in data.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name in wanted and value:
            ctypes.memset(start + offset + len(name) + 1, 0, len(value))
            scrubbed.append(name.decode("utf-8", "replace"))
        offset += len(entry) + 1
    return scrubbed


def not_dumpable() -> bool:
    """Mark this process not dumpable (see the module's docstring); whether that took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def seal_process(names: Iterable[str]) -> None:
    """Both measures, before a build starts: scrub ``names`` from the environment block, then not dumpable."""
    scrub_environment_block(names)
    not_dumpable()
