"""The ledger's file handling: where each ledger lives, the run's lock on it, and writes a crash cannot tear.

One file per server URL and credentials fingerprint (a hash; the token itself is never stored), with a pointer to
the fingerprint last written for runs without credentials (fork pull requests). A run locks the file before reading
it, so that two runs on one state folder take turns instead of saving over each other. The file is written
atomically (temporary file in the same folder, ``fsync``, ``os.replace``): a run killed mid-write leaves the old or
the new state. The ledger is a cache of facts, and losing it costs requests, not correctness: a file that cannot be
read as one (not a regular file, not valid, another server's) is reported, set aside and never trusted, and no
file of the state folder is ever opened so that a FIFO could block it or written through a link.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Self
from urllib.parse import urlsplit

from gitops.edges.atomicfile import replace_atomically
from gitops.edges.clock import Clock, Waiting
from gitops.edges.ledger.format import FORMAT_VERSION, LedgerData, NotALedger, checked_body, decode, dump, signed
from gitops.edges.ledger.seal import SealKey, seal_body, seal_of, unsealed_body
from gitops.edges.locking import FileLock, LockTimeout, file_lock
from gitops.errors import LedgerBusyError
from gitops.secrets import redact

__all__ = ["LOCK_WAIT_ENV", "LOCK_WAIT_SECONDS", "LedgerStore", "lock_wait", "normal_url"]

#: Remembers which fingerprint last wrote a server's ledger, for runs without credentials (fork pull requests).
_LAST_FINGERPRINT = "last-fingerprint"
_FINGERPRINT_RE = re.compile(r"^[0-9a-f]{8,64}$")
_NO_FINGERPRINT = "no-credentials"

#: Leftover temporary files of a killed writer older than this are removed when the ledger is opened.
_STALE_TEMP_SECONDS = 3600

#: How long a run waits for another run to release a ledger before it stops (``GITOPS_LOCK_WAIT`` overrides).
LOCK_WAIT_SECONDS = 120.0
LOCK_WAIT_ENV = "GITOPS_LOCK_WAIT"


def lock_wait(env: Mapping[str, str]) -> float:
    """``$GITOPS_LOCK_WAIT`` seconds (a number from 0 to a day), else :data:`LOCK_WAIT_SECONDS`."""
    raw = env.get(LOCK_WAIT_ENV, "").strip()
    try:
        value = float(raw)
    except ValueError:
        return LOCK_WAIT_SECONDS
    return value if 0 <= value <= 86400 else LOCK_WAIT_SECONDS


def normal_url(url: str) -> str:
    """The server URL as ledgers are keyed by it (scheme and host lower-cased, no trailing ``/``)."""
    parts = urlsplit(url.strip())
    netloc = (parts.hostname or "").lower() + (f":{parts.port}" if parts.port else "")
    return f"{parts.scheme.lower()}://{netloc}{parts.path.rstrip('/')}"


class LedgerStore:
    """One ledger file: opened (and locked) with :meth:`open`, nothing written until :meth:`save`.

    What the data means is :class:`gitops.edges.ledger.Ledger`'s, which adds it to this class.
    """

    def __init__(
        self, path: Path, server_url: str, fingerprint: str | None, *, clock: Clock, seal: SealKey | None = None
    ) -> None:
        self.path = path
        self.server_url = normal_url(server_url)
        self.fingerprint = fingerprint
        self.warnings: list[str] = []
        self._clock = clock
        self._data = LedgerData(
            format_version=FORMAT_VERSION, server_url=self.server_url, fingerprint=fingerprint, saved_at=0.0
        )
        #: Whether the data was read from a file without a ``check`` that verified (and validated): the ledger then
        #: counts as :attr:`changed`, so that the next save writes the file with its check.
        self._unchecked = False
        self._pointer_written = False
        #: The key of the seal (``seal.py``) this run checks and writes: a run with the server's credential has one.
        self._seal = seal
        #: Whether the file read carried a seal: a run without the key never writes over it (it cannot seal).
        self._read_sealed = False
        self._lock: FileLock | None = None
        #: Whether the ledger file (or the pointer) was written without fsync since (see :meth:`sync`).
        self._unsynced = False
        self._unsynced_pointer = False
        #: The data as last loaded or saved (its JSON), to tell whether there is anything to save. A JSON snapshot,
        #: not a deep copy of the data: the dump costs far less than a deep copy of many remembered modules.
        self._saved: bytes | None = None
        #: The file as this run last read or wrote it (its size and modification time), to notice another program
        #: (a ``build:`` command, say) rewriting it meanwhile.
        self._seen: tuple[int, int] | None = None

    # --- where the file is -----------------------------------------------------------------------------------

    @staticmethod
    def normal_url(url: str) -> str:
        """The server URL as ledgers are keyed by it (scheme and host lower-cased, no trailing ``/``)."""
        return normal_url(url)

    @staticmethod
    def path_for(state_dir: Path, server_url: str, fingerprint: str | None) -> tuple[Path, str | None]:
        """The file of the ledger :meth:`open` opens, and the fingerprint it is kept under (``None``: the last
        one written for the server, from its pointer file, or none)."""
        folder = state_dir / "ledger" / _server_slug(server_url)
        if fingerprint is None:
            fingerprint = _read_pointer(folder)
        name = fingerprint if fingerprint is not None else _NO_FINGERPRINT
        return folder / f"{name}.json", fingerprint

    # --- opening, locking, closing ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        state_dir: Path,
        server_url: str,
        fingerprint: str | None,
        *,
        clock: Clock,
        lock_wait: float | None = None,
        waiting: Waiting | None = None,
        seal: SealKey | None = None,
    ) -> Self:
        """The ledger of ``server_url`` for the credentials with ``fingerprint``.

        ``fingerprint`` ``None`` (no credentials, e.g. a fork's pull request) opens the ledger last written for
        that server. A missing file gives an empty ledger; a corrupt one is set aside with a warning in
        :attr:`warnings`. Never raises for the file's content.

        With ``lock_wait`` the ledger is locked for this run before it is read, and stays locked until
        :meth:`close`: a second run on the same state folder waits up to ``lock_wait`` seconds, then stops with
        :class:`LedgerBusyError` naming the run that holds it. So no run saves over what another learnt meanwhile.

        With ``seal`` (the key of the credential, ``seal.py``) only a file sealed with it is believed; another one is
        set aside with a warning, as a corrupt one is, and the file is written sealed.
        """
        path, fingerprint = cls.path_for(state_dir, server_url, fingerprint)
        ledger = cls(path, server_url, fingerprint, clock=clock, seal=seal)
        if lock_wait is not None:
            ledger._acquire(lock_wait, waiting)
        ledger._load()
        ledger._remove_stale_temps()
        ledger._saved = None if ledger._unchecked else dump(ledger._data)
        return ledger

    def _acquire(self, wait: float, waiting: Waiting | None = None) -> None:
        """Lock the ledger file for this run (:mod:`gitops.edges.locking`: ``flock`` on POSIX, ``msvcrt`` on Windows;
        released by the operating system when the process dies, so a killed run never leaves a stale lock)."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        owner_path = self.path.with_name(self.path.name + ".owner")
        _refuse_links(lock_path, owner_path, self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = file_lock(lock_path)
            self._take_turn(lock, owner_path, wait, waiting)
        except LockTimeout:
            raise LedgerBusyError(
                f"another gitops run {_owner(owner_path)} is using the ledger {self.path}; waited {wait:g} s for it",
                hint="Let it finish and run again (runs on one state folder take turns), or raise the wait with "
                f"{LOCK_WAIT_ENV}=SECONDS; a run that was killed releases its lock at once.",
            ) from None
        except OSError as exc:
            self.warnings.append(
                f"the ledger at {self.path} cannot be locked ({exc.strerror}); a run at the same time on this state "
                "folder could save over what this one learns."
            )
            return
        self._lock = lock
        _write_owner(owner_path)

    def _take_turn(self, lock: FileLock, owner_path: Path, wait: float, waiting: Waiting | None) -> None:
        """Take ``lock`` at once, or else say whose it is and wait for it (as Terraform's "Acquiring state lock")."""
        try:
            lock.acquire(timeout=0)
        except LockTimeout:
            what = f"the ledger {self.path}, locked by another gitops run {_owner(owner_path)} (up to {wait:g} s)"
            with waiting(what) if waiting is not None else contextlib.nullcontext():
                lock.acquire(timeout=wait, poll_interval=0.05)

    def close(self) -> None:
        """Release the run's lock (nothing else: saving is :meth:`save`)."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    # --- reading ---------------------------------------------------------------------------------------------

    def _stat(self) -> tuple[int, int] | None:
        try:
            info = self.path.stat()
        except OSError:
            return None
        return info.st_size, info.st_mtime_ns

    def notice_rewrite(self) -> None:
        """Add a warning when another program rewrote the file since this run read or wrote it (a build command
        can write where the ledgers live); the run goes on with the copy it read first."""
        if self._stat() != self._seen:
            warning = (
                f"the ledger at {self.path} was changed by another program during this run (a build command can "
                "write there); this run planned from the copy it read first, and writes that copy back."
            )
            if warning not in self.warnings:
                self.warnings.append(warning)

    def _load(self) -> None:
        self._seen = self._stat()
        try:
            raw = _read_regular(self.path)
        except FileNotFoundError:
            return
        except _NotRegular as exc:
            self._set_aside(f"{exc.args[0]}, not a file")
            return
        except OSError as exc:
            self.warnings.append(
                f"the ledger at {self.path} cannot be read ({exc.strerror}); starting without it, so rate-limit "
                "figures are counted from zero and branches are downloaded."
            )
            return
        body = checked_body(raw)
        self._read_sealed = body is not None and seal_of(body) is not None
        if self._seal is not None and (body is None or unsealed_body(body, self._seal) is None):
            self._set_aside(
                "it does not carry the seal of this run's credential: written by an older version or by a run without "
                "the credential, or changed since (the Actions cache is writable by any job of the branch), so "
                "nothing in it is believed",
                what="is not sealed",
            )
            return
        try:
            data, unchecked = decode(raw)
        except NotALedger as exc:
            self._set_aside(exc.args[0])
            return
        if data.server_url != self.server_url or data.fingerprint != self.fingerprint:
            self._set_aside("it belongs to another server or credentials")
            return
        self._data = data
        self._unchecked = unchecked
        self._prune()

    def _set_aside(self, reason: str, *, what: str = "was corrupt") -> None:
        stamp = datetime.fromtimestamp(self._clock.now(), tz=UTC).strftime("%Y%m%dT%H%M%SZ")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        try:
            os.replace(self.path, aside)
            moved = f"set aside as {aside}"
        except OSError as exc:
            moved = f"it could not be set aside ({exc.strerror}) and will be overwritten"
        # What this run did to the file is no change by another program (notice_rewrite compares with this).
        self._seen = self._stat()
        self.warnings.append(
            f"the ledger at {self.path} {what} ({reason}); {moved}; starting afresh, so rate-limit figures "
            "are counted from zero and branches are downloaded."
        )

    def _remove_stale_temps(self) -> None:
        # A writer killed between creating its temporary file and os.replace leaves the file behind.
        cutoff = self._clock.now() - _STALE_TEMP_SECONDS
        with contextlib.suppress(OSError):
            for temp in self.path.parent.glob(f".{self.path.name}.*.tmp"):
                with contextlib.suppress(OSError):
                    if temp.stat().st_mtime < cutoff:
                        temp.unlink()

    def _prune(self) -> None:
        """Drop the records no window can need any more, when the file is read and before it is written (which
        records those are is the knowledge's: :class:`gitops.edges.ledger.Ledger` says)."""

    # --- writing ---------------------------------------------------------------------------------------------

    @property
    def changed(self) -> bool:
        """Whether something was recorded since the ledger was opened or last saved, or the file read had no valid
        ``check`` (an older ledger, or one edited by hand): the next save gives it one."""
        return self._saved is None or dump(self._data) != self._saved

    def save(self, *, durable: bool = True) -> None:
        """Write the ledger atomically: a temporary file in the same folder, then ``os.replace``.

        ``durable`` also ``fsync``s the file before the rename and the folder after it, so that the new content
        survives a crash of the machine. Without it the write is still atomic for every reader and safe when the
        process is killed (``kill -9``: the kernel keeps the written pages); :meth:`sync` makes it durable later.
        """
        self._prune()
        self.notice_rewrite()
        if self._seal is None and self._read_sealed:
            # Without the credential the seal cannot be made again: the sealed file the deploy left stays as it is
            # (a run without credentials sends no request, so it has nothing the next deploy needs).
            return
        self._data.saved_at = float(self._clock.now())
        body = dump(self._data)
        _atomic_write(self.path, signed(body if self._seal is None else seal_body(body, self._seal)), durable=durable)
        self._saved = body
        self._seen = self._stat()
        self._unsynced = not durable
        if self.fingerprint is not None and not self._pointer_written:
            self._write_pointer(self.fingerprint, durable=durable)
        if durable:
            self.sync()  # a pointer written by an earlier step's save

    def _write_pointer(self, fingerprint: str, *, durable: bool) -> None:
        """Point the server's folder at this fingerprint's file (once a run), for runs without credentials."""
        pointer = self.path.parent / _LAST_FINGERPRINT
        if _read_pointer(self.path.parent) != fingerprint:
            _atomic_write(pointer, fingerprint.encode("ascii") + b"\n", durable=durable)
            self._unsynced_pointer = not durable
        self._pointer_written = True

    def sync(self) -> None:
        """Make the last :meth:`save` durable (``fsync`` of the file, the pointer and the folder), if it was not."""
        paths = [self.path] if self._unsynced else []
        if self._unsynced_pointer:
            paths.append(self.path.parent / _LAST_FINGERPRINT)
        if not paths:
            return
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _sync_folder(self.path.parent)
        self._unsynced = self._unsynced_pointer = False


def _server_slug(url: str) -> str:
    normal = normal_url(url)
    readable = re.sub(r"[^a-z0-9.-]+", "_", normal.split("://", 1)[-1]).strip("_") or "server"
    return f"{readable[:60]}-{hashlib.sha256(normal.encode()).hexdigest()[:10]}"


def _refuse_links(*paths: Path) -> None:
    for path in paths:
        if path.is_symlink():
            # The lock is opened for writing (and truncated), the owner file written: never through a link,
            # which could point at any file of the user's.
            raise LedgerBusyError(
                f"{path} is a symbolic link; the state folder's files are never written through links",
                hint="Remove the link (the tool makes the file again), or give another --state-dir.",
            )


def _write_owner(owner_path: Path) -> None:
    """Note who holds the lock (process, command, since when), for a run that finds it held."""
    since = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    command = " ".join([Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:]])[:200]
    info = json.dumps({"pid": os.getpid(), "command": redact(command), "since": since})
    with contextlib.suppress(OSError):
        # O_NONBLOCK: a FIFO put there would hold the open until a reader came (with it: ENXIO, suppressed).
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(owner_path, flags, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(info + "\n")


class _NotRegular(OSError):
    """A state file's name holds something else than a regular file (``args[0]`` says what)."""


def _read_regular(path: Path) -> bytes:
    """The bytes of the regular file at ``path``, opened without blocking: a FIFO (or a device, a folder) put in a
    state file's place would hold a plain ``open`` or ``read`` until a writer came; it is :class:`_NotRegular`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _NotRegular(
                "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "a device or socket"
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)


def _owner(owner_path: Path) -> str:
    """``(pid 4242, 'gitops apply --yes', since 2026-11-22 21:50:03 UTC)`` from the holder's note, if readable."""
    try:
        info = json.loads(_read_regular(owner_path).decode("utf-8"))
        return f"(pid {int(info['pid'])}, '{redact(str(info['command']))[:200]}', since {str(info['since'])[:40]})"
    except (OSError, ValueError, KeyError, TypeError):
        return "(its process is not recorded)"


def _read_pointer(folder: Path) -> str | None:
    try:
        text = _read_regular(folder / _LAST_FINGERPRINT).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if _FINGERPRINT_RE.match(text) else None


def _atomic_write(path: Path, payload: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``payload`` so that readers see the old or the new content, never a mix; ``durable``
    also makes the new content survive a crash of the machine (``fsync`` of the file and of the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, payload, temp_prefix=f".{path.name}.", fsync=durable)
    if durable:
        _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    # A rename is durable only once the folder is synced (POSIX; not possible on Windows).
    if hasattr(os, "O_DIRECTORY"):
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
