"""The code kept for an undo (issue 39): a few whole code sets beside a server's ledger, one file each.

The ledger holds digests, never module text; ``gitops rollback`` and an interrupted verification's undo need the
text of the code to restore. It is kept here, in ``<ledger file without .json>.code/<digest>.modules`` (JSON, but
not named ``.json``: no walk over the state folder for ledgers takes them): only the sets that
``gitops.core.deploys.kept_digests`` names (the newest few deploys of each branch, and the code each
verification record would restore); :func:`prune` removes the rest. Each file is written atomically and read back
only when its modules still have the digest it is named by (a damaged or edited file is not restored from, and is
written anew when that code is kept again). The digests come from the ledger, which a run holding the credential
believes only when it carries that credential's seal (``edges/ledger/seal.py``): code swapped in through the Actions
cache matches no authenticated digest, so it is never restored.
Module text is the player's code: never credentials (the tool's own tokens are never in it).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

import orjson

from gitops.core.codeset import CodeSet, WireModule
from gitops.edges.atomicfile import replace_atomically


def folder_for(ledger_path: Path) -> Path:
    """The folder of the code kept beside the ledger file ``ledger_path``."""
    return ledger_path.with_name(ledger_path.stem + ".code")


def _file(folder: Path, digest: str) -> Path:
    return folder / (re.sub(r"[^A-Za-z0-9]+", "-", digest)[:100] + ".modules")


def keep(folder: Path, digest: str, modules: Mapping[str, WireModule]) -> bool:
    """Keep ``modules`` (whose set digest is ``digest``) unless already kept; ``False`` when the folder cannot be
    written (the state folder's trouble is the ledger's to report: the code is then simply not kept)."""
    try:
        _write(folder, digest, modules)
    except OSError:
        return False
    return True


def write_kept(folder: Path, digest: str, modules: Mapping[str, WireModule]) -> None:
    """Keep ``modules`` as :func:`keep` does, raising the ``OSError`` (``apply`` keeps the code it is about to send
    before it sends it, and refuses when the state folder is full or read-only)."""
    _write(folder, digest, modules)


def _write(folder: Path, digest: str, modules: Mapping[str, WireModule]) -> None:
    path = _file(folder, digest)
    if kept(folder, digest) is not None:
        return
    # Not there, or not that code (a file put there under the digest's name, say): written anew.
    folder.mkdir(parents=True, exist_ok=True)
    payload = orjson.dumps({"digest": digest, "modules": dict(modules)})
    replace_atomically(path, payload, temp_prefix=".kept.", fsync=True)


def kept(folder: Path, digest: str) -> dict[str, WireModule] | None:
    """The modules kept for ``digest``, or ``None`` when they are not kept (or the file no longer matches)."""
    try:
        data = orjson.loads(_read_regular(_file(folder, digest)))
        modules = data["modules"]
        if data["digest"] != digest or CodeSet.from_wire(modules).digest != digest:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return dict(modules)


def _read_regular(path: Path) -> bytes:
    """The bytes of the regular file at ``path``; ``OSError`` for anything else (a FIFO put there through the cache
    would hold a plain read until a writer came; a link is not followed)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)


def is_kept(folder: Path, digest: str) -> bool:
    return _file(folder, digest).is_file()


def prune(folder: Path, digests: Iterable[str]) -> None:
    """Remove every kept set but those of ``digests``."""
    wanted = {_file(folder, d).name for d in digests}
    with contextlib.suppress(OSError):
        for path in folder.glob("*.modules"):
            if path.name not in wanted:
                with contextlib.suppress(OSError):
                    path.unlink()


__all__ = ["folder_for", "is_kept", "keep", "kept", "prune", "write_kept"]
