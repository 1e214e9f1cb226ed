"""Writing a file whole or not at all: the one way the tool replaces a file it keeps (the ledgers, the code kept
for an undo, the build cache). A file a user names (``--out``) has its own writer, :mod:`gitops.edges.outfile`,
which checks the path again just before the rename and words each failure for the option.

The content goes to a temporary file in the same folder, which is then renamed over the path: a reader, or a run
killed half-way, sees the old content or the new, never a mix, and a failed write leaves no temporary file behind.
``fsync`` is asked only where the content must survive a crash of the machine (the ledger, the code kept for an
undo); a cache is rebuilt when lost. ``mkstemp`` creates the temporary file readable by its owner only. (The
manifest cache, in ``config/``, below the edges, keeps its own few lines.)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def replace_atomically(
    path: Path,
    payload: bytes,
    *,
    temp_prefix: str,
    fsync: bool = False,
) -> None:
    """Replace ``path`` with ``payload`` through a temporary file ``<temp_prefix>...tmp`` in its folder (which must
    exist); ``fsync`` the content before the rename. Whatever is raised, the temporary file is removed."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # the error that stopped the write is the one to report
            os.unlink(temp)
        raise
