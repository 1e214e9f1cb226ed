"""Files the tool writes where the user says (``plan --out``, ``build --out``): only a regular file or a new path,
replaced atomically, so that a reader never sees half a file and nothing else is ever replaced.

Written under a temporary name in the same folder and renamed over the path: over a device (``/dev/null``, as
root), a FIFO, a symbolic link (to a file elsewhere) or a folder, that rename would replace the thing itself, so the
path is checked with ``lstat`` (a link is seen as a link, never followed) before and again just before the rename.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from gitops.errors import UsageError


def check_out_path(path: Path, *, what: str, option: str = "--out") -> None:
    """:class:`UsageError` unless ``path`` is a regular file or does not exist yet; ``what`` is the kind of file as
    messages name it ("plan": "a plan is saved only to ...", "cannot write the plan to ...")."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(
            f"cannot write the {what} to {path}: {exc.strerror or exc}",
            hint=f"Name a file in a folder you can write to with {option}.",
        ) from None
    if stat.S_ISREG(mode):
        return
    kind = (
        "a symbolic link"
        if stat.S_ISLNK(mode)
        else "a folder"
        if stat.S_ISDIR(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "not a regular file"
    )
    raise UsageError(
        f"{option} {path} is {kind}; a {what} is saved only to a regular file or a new path, and nothing was replaced",
        hint=f"Name a new file (or a regular file to overwrite) with {option}.",
    )


def write_out(path: Path, text: str, *, what: str, option: str = "--out") -> None:
    """Write ``text`` (ASCII: callers escape what is not) to ``path`` atomically, checked by :func:`check_out_path`
    before and just before the rename; :class:`UsageError` when the folder cannot be written."""
    check_out_path(path, what=what, option=option)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise UsageError(
            f"cannot write the {what} to {path}: {exc.strerror or exc}",
            hint=f"Name a file in a folder you can write to with {option}.",
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="ascii") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        check_out_path(path, what=what, option=option)
        os.replace(temp, path)
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise UsageError(f"cannot write the {what} to {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
