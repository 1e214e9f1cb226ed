"""One ``git`` command's standard output, for the small questions the tool asks of a repository (the checked-out
commit, a folder's prefix, a file at a commit, the index): ``None`` when git is missing, fails or hangs.

The work tree is never locked for it (``GIT_OPTIONAL_LOCKS=0``: a run beside the player's editor or another gitops
must not stall on ``index.lock``), nothing is read from standard input, and a git that does not answer within
:data:`TIMEOUT` seconds is a failure, not a hang.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: The longest one question may take (``ls-files`` of a large tree is well under a second here).
TIMEOUT = 120.0


def git_output(args: list[str], cwd: Path) -> bytes | None:
    """``git ARGS`` run in ``cwd``: its standard output when it exits 0, else ``None``."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
            timeout=TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_text(args: list[str], cwd: Path) -> str | None:
    """:func:`git_output` as text, stripped (a commit id, a prefix)."""
    out = git_output(args, cwd)
    return None if out is None else out.decode("utf-8", "replace").strip()
