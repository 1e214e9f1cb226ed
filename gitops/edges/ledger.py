"""The local ledger: what this tool has learnt of one server account, kept between runs.

One JSON file per server URL and credentials fingerprint (a hash; the token itself is never stored) holds:

* the last ``X-RateLimit-*`` headers seen for each endpoint,
* the requests this tool sent (time and endpoint), pruned once no limit window can need them,
* the last known state of each branch: module names, digests, sizes and the set digest (never module text), with
  when and how it was learnt (``download`` or ``own-upload``),
* the last *applied* state of each branch (what this tool last made it hold; drift is measured against it,
  ``gitops.core.drift``), kept apart from the last known state, and the set of an upload not yet known to have
  landed,
* the branch list with its active flags, and
* the end of an unlimited (no-rate-limit) period.

The HTTP client tells the ledger what it learns (the ledger is its observer, ``gitops.edges.service.Observer``);
the session saves it once per logical step. With it a plan can budget its requests without spending any
(``windows()``), and ``--refresh=auto`` can skip downloading a branch the tool uploaded itself a moment ago. The
file is written atomically (temporary file in the same folder, ``fsync``, ``os.replace``), so a run killed
mid-write leaves the old or the new state; a run killed between saves loses at most its step in progress. A file
that is not valid is reported, set aside and never trusted: the ledger is a cache of facts, losing it costs
requests, not correctness. Layout and format: ``docs/budget-and-ledger.md``.

Every file gitops writes ends with a ``check`` (SHA-256 of the rest, see :data:`_CHECK_HEAD`). A file whose check
verifies was written by gitops from validated data and is built as it is, without pydantic; any other file (an older
ledger without the field, one edited by hand, a damaged one) is validated by pydantic as it always was: loaded when
valid (and given its check by the next save), set aside when not.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal
from urllib.parse import urlsplit

import orjson

from gitops.config.folders import STATE_DIR_ENV, default_state_dir
from gitops.core.budget import WindowState
from gitops.core.codeset import request_body
from gitops.core.deploys import Deploy, VerifyRecord, add_deploy, with_state
from gitops.core.endpoints import (
    ENDPOINT_LIMITS,
    GLOBAL_KEY,
    GLOBAL_LIMIT,
    LONGEST_PERIOD,
    MINUTE,
    Limit,
    header_number,
    limit_for,
    reset_time,
    window_key,
)
from gitops.core.remote import BranchInfo, ModuleFacts, Provenance, RemoteBranch
from gitops.edges.clock import Clock, Waiting
from gitops.errors import LedgerBusyError
from gitops.secrets import redact

if TYPE_CHECKING:  # at run time imported by _validated only (see there)
    from annotated_types import Ge

    from gitops.core.drift import AppliedRecord  # imported by _record: once the servers answered
    from gitops.edges.locking import FileLock

__all__ = [
    "FORMAT_VERSION",
    "STATE_DIR_ENV",
    "Ledger",
    "default_state_dir",
]

#: Version of the ledger file format; a file of another version is set aside, not read.
FORMAT_VERSION: Final = 1

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


# --- the file format -----------------------------------------------------------------------------------------
#
# Plain mutable dataclasses, not pydantic models: a ledger that gitops wrote itself (its ``check`` verifies, see
# ``_load``) is built straight from its JSON without importing pydantic (~0.15 s of a run's CPU, issue 23), and written
# with orjson, which serializes a dataclass in its field order exactly as pydantic's ``model_dump_json`` wrote the
# models (compact, UTF-8, the same float notation). No ``slots``: orjson writes a dataclass with a ``__dict__`` ~8x
# faster than one with slots (0.7 ms against 5 ms for 6,000 module entries). pydantic validates a file that does not
# verify, through ``pydantic.TypeAdapter(_File)`` (the constraints below are ``annotated_types``, the config
# ``__pydantic_config__``); the JSON shape is the one of format version 1 plus ``check``.
# Dataclasses do not convert what they are given as pydantic did: the methods that fill them pass times through
# ``float()``, so that a whole second is written ``1800000000.0`` as before, never ``1800000000``.

#: pydantic's configuration of every class of the file (unknown keys make a file "not shaped as a ledger").
_FORBID: dict[str, Any] = {"extra": "forbid"}

#: ``gitops.config.manifest.ActiveName``, defined here too so that the ledger imports nothing of the manifest's
#: (the manifest module imports pydantic); ``tests/test_ledger.py`` checks that the two say the same.
ActiveName = Literal["world", "sim"]


@dataclass
class _Headers:
    __pydantic_config__ = _FORBID
    limit: Annotated[int, Ge(0)]
    remaining: int
    reset: float
    learnt_at: float
    status: int
    #: Sequence number of the last request sent when these headers arrived: later requests are subtracted.
    seq: int


@dataclass
class _Module:
    __pydantic_config__ = _FORBID
    digest: str
    size: Annotated[int, Ge(0)]
    binary: bool


@dataclass
class _Branch:
    __pydantic_config__ = _FORBID
    exists: bool
    digest: str | None
    modules: dict[str, _Module] | None
    learnt_at: float
    how: Provenance
    #: The server's modification stamp of the branch when this was learnt (the branch list's ``timestamp``, or the
    #: upload's answer): a later list showing the same stamp confirms the record without a download.
    stamp: str | None = None


@dataclass
class _Applied:
    """What this tool last applied to a branch (``gitops.core.drift.AppliedRecord``): digests, never text."""

    __pydantic_config__ = _FORBID
    digest: str
    modules: dict[str, _Module]
    applied_at: float
    how: Literal["upload", "verified"]
    commit: str | None = None
    source: str | None = None


@dataclass
class _Verify:
    """A branch's verification state (``gitops.core.deploys.VerifyRecord``); the code to restore is kept beside the
    ledger (``edges/codestore.py``), here only its digest."""

    __pydantic_config__ = _FORBID
    state: Literal["pending", "interrupted", "healthy", "unknown", "failing", "rolled-back", "rollback-failed"]
    digest: str | None
    commit: str | None
    applied_at: float
    recorded_at: float
    reason: str = ""
    undo: Literal["restore", "standby", "none"] = "none"
    restore_digest: str | None = None
    standby: str | None = None
    standby_for: list[str] = field(default_factory=list)


@dataclass
class _Deploy:
    """One deploy of the history (``gitops.core.deploys.Deploy``): digests, never text."""

    __pydantic_config__ = _FORBID
    n: int
    branch: str
    digest: str | None
    commit: str | None
    applied_at: float
    how: Literal["apply", "rollback"] = "apply"
    state: (
        Literal["pending", "interrupted", "healthy", "unknown", "failing", "rolled-back", "rollback-failed"] | None
    ) = None


@dataclass
class _BranchEntry:
    __pydantic_config__ = _FORBID
    name: str
    active_world: bool = False
    active_sim: bool = False


@dataclass
class _BranchList:
    __pydantic_config__ = _FORBID
    learnt_at: float
    branches: list[_BranchEntry]


@dataclass
class _File:
    __pydantic_config__ = _FORBID
    format_version: Literal[1]
    server_url: str
    fingerprint: str | None
    saved_at: float
    seq: int = 0
    headers: dict[str, _Headers] = field(default_factory=dict)
    #: endpoint -> [[sent at, sequence number], ...], oldest first.
    sent: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    branches: dict[str, _Branch] = field(default_factory=dict)
    branch_list: _BranchList | None = None
    unlimited_until: float | None = None
    #: Per branch: the last applied record (drift is measured against it); never overwritten by downloads.
    applied: dict[str, _Applied] = field(default_factory=dict)
    #: Per branch: the set of an upload about to be sent, until it is known to have landed (a lost answer).
    pending: dict[str, _Applied] = field(default_factory=dict)
    #: Whether the server reads compressed request bodies (learnt by the probe, ``gitops.edges.service``), and when.
    compression: Literal["accepted", "refused"] | None = None
    compression_at: float | None = None
    #: What the token may use, from the token query: ``None`` unknown, else full access or these endpoint keys.
    scope_full: bool | None = None
    scope_endpoints: list[str] = field(default_factory=list)
    scope_at: float | None = None
    #: Per branch: the verification state of its last deploy (issue 39; absent in older ledgers: none recorded).
    verifications: dict[str, _Verify] = field(default_factory=dict)
    #: The deploys this tool made, oldest first, at most ``gitops.core.deploys.HISTORY_LIMIT``.
    history: list[_Deploy] = field(default_factory=list)


#: The integrity field gitops appends to every ledger it writes: ``,"check":"sha256:<64 hex digits>"}`` closes the
#: file (then a newline), and the digest is SHA-256 of the file's bytes without that member, i.e. of the compact JSON
#: object of the data exactly as written. Hashing the written bytes (not a re-serialization of the parsed value)
#: makes checking cost one pass of SHA-256 (~0.5 ms for 750 kB), needs no canonical form that two JSON writers must
#: agree on, and catches any change to the file, even one that leaves it valid JSON. It is an integrity check, not a
#: signature: it tells "written by gitops from validated data" from "edited, truncated or written by something
#: else", and anyone able to write the state folder can also write a matching digest.
_CHECK_HEAD = b',"check":"sha256:'
_CHECK_TAIL = b'"}\n'
_CHECK_LENGTH = len(_CHECK_HEAD) + 64 + len(_CHECK_TAIL)
_HEX = frozenset(b"0123456789abcdef")


def _dump(data: _File) -> bytes:
    """The compact JSON of ``data`` (without ``check``), as pydantic's ``model_dump_json`` wrote it.

    A lone surrogate (a branch or module name the server sent as an unpaired ``\\udXXX`` escape) cannot be UTF-8,
    which orjson refuses: the standard library writes the file then, with the surrogate as its escape, so that the
    name reads back unchanged (pydantic wrote it as U+FFFD replacement characters, a name no branch has).
    """
    try:
        return orjson.dumps(data)
    except TypeError:  # orjson.JSONEncodeError
        return request_body(asdict(data))


def _signed(body: bytes) -> bytes:
    """The file's bytes: ``body`` with the ``check`` member appended (see :data:`_CHECK_HEAD`)."""
    digest = hashlib.sha256(body).hexdigest().encode("ascii")
    return body[:-1] + _CHECK_HEAD + digest + _CHECK_TAIL


def _verifies(raw: bytes) -> bool:
    """Whether ``raw`` ends with a ``check`` member that matches the rest (then gitops wrote it)."""
    if len(raw) <= _CHECK_LENGTH or not raw.endswith(_CHECK_TAIL):
        return False
    head = len(raw) - _CHECK_LENGTH
    digest = raw[head + len(_CHECK_HEAD) : -len(_CHECK_TAIL)]
    if raw[head : head + len(_CHECK_HEAD)] != _CHECK_HEAD or not _HEX.issuperset(digest):
        return False
    hasher = hashlib.sha256(memoryview(raw)[:head])
    hasher.update(b"}")
    return hasher.hexdigest().encode("ascii") == digest


def _parse(raw: bytes) -> Any:
    """The JSON value of the file: orjson first; what it refuses (lone surrogates, NaN, integers over 64 bits,
    nesting over 1,024) the standard library decides, as ``gitops.edges.http.parse_json`` does. ``ValueError`` when
    it is not JSON (deep nesting included: it is no ledger)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _modules(raw: dict[str, Any]) -> dict[str, _Module]:
    return {n: _Module(m["digest"], m["size"], m["binary"]) for n, m in raw.items()}


def _applied_from(raw: dict[str, Any]) -> _Applied:
    return _Applied(
        raw["digest"],
        _modules(raw["modules"]),
        raw["applied_at"],
        raw["how"],
        raw.get("commit"),
        raw.get("source"),
    )


def _built(raw: dict[str, Any]) -> _File:
    """The dataclasses of a file whose ``check`` verified: gitops wrote it from validated data, so it is built as it
    is, without validating it again (a missing key or a value of the wrong kind raises ``KeyError``/``TypeError``/
    ``AttributeError``/``ValueError``, and the caller validates instead)."""
    branch_list = raw.get("branch_list")
    return _File(
        format_version=raw["format_version"],
        server_url=raw["server_url"],
        fingerprint=raw["fingerprint"],
        saved_at=raw["saved_at"],
        seq=raw.get("seq", 0),
        headers={
            e: _Headers(h["limit"], h["remaining"], h["reset"], h["learnt_at"], h["status"], h["seq"])
            for e, h in raw.get("headers", {}).items()
        },
        sent={e: [(t, n) for t, n in entries] for e, entries in raw.get("sent", {}).items()},
        branches={
            name: _Branch(
                b["exists"],
                b["digest"],
                None if b["modules"] is None else _modules(b["modules"]),
                b["learnt_at"],
                b["how"],
                b.get("stamp"),
            )
            for name, b in raw.get("branches", {}).items()
        },
        branch_list=None
        if branch_list is None
        else _BranchList(
            branch_list["learnt_at"],
            [
                _BranchEntry(e["name"], e.get("active_world", False), e.get("active_sim", False))
                for e in branch_list["branches"]
            ],
        ),
        unlimited_until=raw.get("unlimited_until"),
        applied={name: _applied_from(a) for name, a in raw.get("applied", {}).items()},
        pending={name: _applied_from(a) for name, a in raw.get("pending", {}).items()},
        compression=raw.get("compression"),
        compression_at=raw.get("compression_at"),
        scope_full=raw.get("scope_full"),
        scope_endpoints=list(raw.get("scope_endpoints", [])),
        scope_at=raw.get("scope_at"),
        verifications={
            name: _Verify(
                v["state"],
                v["digest"],
                v["commit"],
                v["applied_at"],
                v["recorded_at"],
                v.get("reason", ""),
                v.get("undo", "none"),
                v.get("restore_digest"),
                v.get("standby"),
                list(v.get("standby_for", [])),
            )
            for name, v in raw.get("verifications", {}).items()
        },
        history=[
            _Deploy(
                d["n"], d["branch"], d["digest"], d["commit"], d["applied_at"], d.get("how", "apply"), d.get("state")
            )
            for d in raw.get("history", [])
        ],
    )


def _validated(loaded: Any) -> _File:
    """``loaded`` validated by pydantic as a ledger file (``pydantic.ValidationError``, a ``ValueError``, if it is not
    one). Only for a file whose ``check`` does not verify (an older ledger, one edited by hand, a damaged one): pydantic
    is imported here, never for a ledger gitops wrote."""
    from annotated_types import Ge
    from pydantic import TypeAdapter

    # The classes' annotations are strings (``Annotated[int, Ge(0)]``), resolved by pydantic in this module's names:
    # ``Ge`` joins them here, so that a ledger that verifies never pays annotated_types' import (~20 ms).
    globals().setdefault("Ge", Ge)
    if isinstance(loaded, dict):
        loaded = {k: v for k, v in loaded.items() if k != "check"}
    return TypeAdapter(_File).validate_python(loaded)


def _normal_url(url: str) -> str:
    parts = urlsplit(url.strip())
    netloc = (parts.hostname or "").lower() + (f":{parts.port}" if parts.port else "")
    return f"{parts.scheme.lower()}://{netloc}{parts.path.rstrip('/')}"


def _server_slug(url: str) -> str:
    normal = _normal_url(url)
    readable = re.sub(r"[^a-z0-9.-]+", "_", normal.split("://", 1)[-1]).strip("_") or "server"
    return f"{readable[:60]}-{hashlib.sha256(normal.encode()).hexdigest()[:10]}"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    lower = name.lower()
    for key, value in headers.items():
        if key.lower() == lower:
            return value
    return None


def _advertises_deflate(value: str | None) -> bool:
    codings = [part.split(";", 1)[0].strip().lower() for part in (value or "").split(",")]
    return "deflate" in codings


def _int(value: str | None) -> int | None:
    number = header_number(value)
    return None if number is None else int(number)


class Ledger:
    """What is known of one server account's rate limits and branches; see the module docstring.

    Open it with :meth:`open`; nothing is written until :meth:`save`.
    """

    def __init__(self, path: Path, server_url: str, fingerprint: str | None, *, clock: Clock) -> None:
        self.path = path
        self.server_url = _normal_url(server_url)
        self.fingerprint = fingerprint
        self.warnings: list[str] = []
        self._clock = clock
        self._data = _File(
            format_version=FORMAT_VERSION, server_url=self.server_url, fingerprint=fingerprint, saved_at=0.0
        )
        #: Whether the data was read from a file without a ``check`` that verified (and validated): the ledger then
        #: counts as :attr:`changed`, so that the next save writes the file with its check.
        self._unchecked = False
        self._pointer_written = False
        #: remembered_branch's module facts, by branch, with the record's module map they were built from.
        self._facts: dict[str, tuple[dict[str, _Module], dict[str, ModuleFacts]]] = {}
        self._lock: FileLock | None = None
        #: Whether the ledger file (or the pointer) was written without fsync since (see :meth:`sync`).
        self._unsynced = False
        self._unsynced_pointer = False
        #: The data as last loaded or saved (its JSON), to tell whether there is anything to save. A JSON snapshot,
        #: not a deep copy of the data: with 2,000 remembered modules a deep copy costs ~40 ms, the dump ~1 ms.
        self._saved: bytes | None = None
        #: The file as this run last read or wrote it (its size and modification time), to notice another program
        #: (a ``build:`` command, say) rewriting it meanwhile.
        self._seen: tuple[int, int] | None = None

    # --- opening and saving ----------------------------------------------------------------------------------

    @staticmethod
    def normal_url(url: str) -> str:
        """The server URL as ledgers are keyed by it (scheme and host lower-cased, no trailing ``/``)."""
        return _normal_url(url)

    @staticmethod
    def path_for(state_dir: Path, server_url: str, fingerprint: str | None) -> tuple[Path, str | None]:
        """The file of the ledger :meth:`open` opens, and the fingerprint it is kept under (``None``: the last
        one written for the server, from its pointer file, or none)."""
        folder = state_dir / "ledger" / _server_slug(server_url)
        if fingerprint is None:
            fingerprint = _read_pointer(folder)
        name = fingerprint if fingerprint is not None else _NO_FINGERPRINT
        return folder / f"{name}.json", fingerprint

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
    ) -> Ledger:
        """The ledger of ``server_url`` for the credentials with ``fingerprint``.

        ``fingerprint`` ``None`` (no credentials, e.g. a fork's pull request) opens the ledger last written for
        that server. A missing file gives an empty ledger; a corrupt one is set aside with a warning in
        :attr:`warnings`. Never raises for the file's content.

        With ``lock_wait`` the ledger is locked for this run before it is read, and stays locked until
        :meth:`close`: a second run on the same state folder waits up to ``lock_wait`` seconds, then stops with
        :class:`LedgerBusyError` naming the run that holds it. So no run saves over what another learnt meanwhile.
        """
        path, fingerprint = cls.path_for(state_dir, server_url, fingerprint)
        ledger = cls(path, server_url, fingerprint, clock=clock)
        if lock_wait is not None:
            ledger._acquire(lock_wait, waiting)
        ledger._load()
        ledger._remove_stale_temps()
        ledger._saved = None if ledger._unchecked else _dump(ledger._data)
        return ledger

    def _acquire(self, wait: float, waiting: Waiting | None = None) -> None:
        """Lock the ledger file for this run (:mod:`gitops.edges.locking`: ``flock`` on POSIX, ``msvcrt`` on Windows;
        released by the operating system when the process dies, so a killed run never leaves a stale lock)."""
        from gitops.edges.locking import LockTimeout, file_lock

        lock_path = self.path.with_name(self.path.name + ".lock")
        owner_path = self.path.with_name(self.path.name + ".owner")
        for path in (lock_path, owner_path, self.path):
            if path.is_symlink():
                # The lock is opened for writing (and truncated), the owner file written: never through a link,
                # which could point at any file of the user's.
                raise LedgerBusyError(
                    f"{path} is a symbolic link; the state folder's files are never written through links",
                    hint="Remove the link (the tool makes the file again), or give another --state-dir.",
                )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = file_lock(lock_path)
            try:
                lock.acquire(timeout=0)
            except LockTimeout:
                # Held by another run: say whose, and wait (as Terraform's "Acquiring state lock").
                what = f"the ledger {self.path}, locked by another gitops run {_owner(owner_path)} (up to {wait:g} s)"
                with waiting(what) if waiting is not None else contextlib.nullcontext():
                    lock.acquire(timeout=wait, poll_interval=0.05)
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
        since = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        command = " ".join([Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:]])[:200]
        info = json.dumps({"pid": os.getpid(), "command": redact(command), "since": since})
        with contextlib.suppress(OSError):
            # O_NONBLOCK: a FIFO put there would hold the open until a reader came (with it: ENXIO, suppressed).
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(owner_path, flags, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(info + "\n")

    def close(self) -> None:
        """Release the run's lock (nothing else: saving is :meth:`save`)."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

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
        try:
            loaded = _parse(raw)
        except ValueError:  # also json.JSONDecodeError and UnicodeDecodeError
            self._set_aside("not valid JSON")
            return
        if isinstance(loaded, dict) and loaded.get("format_version") != FORMAT_VERSION:
            self._set_aside(f"format_version {loaded.get('format_version')!r}, expected {FORMAT_VERSION}")
            return
        data = None
        if isinstance(loaded, dict) and _verifies(raw):
            # Written by gitops from validated data: built as it is. A shape this code cannot build (which gitops
            # never writes) is validated instead.
            with contextlib.suppress(KeyError, TypeError, AttributeError, ValueError):
                data = _built(loaded)
        unchecked = data is None
        if data is None:
            try:
                data = _validated(loaded)
            except ValueError:  # pydantic's ValidationError
                self._set_aside("not shaped as a ledger")
                return
        if data.server_url != self.server_url or data.fingerprint != self.fingerprint:
            self._set_aside("it belongs to another server or credentials")
            return
        self._data = data
        self._unchecked = unchecked
        self._prune()

    def _set_aside(self, reason: str) -> None:
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
            f"the ledger at {self.path} was corrupt ({reason}); {moved}; starting afresh, so rate-limit figures "
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

    @property
    def changed(self) -> bool:
        """Whether something was recorded since the ledger was opened or last saved, or the file read had no valid
        ``check`` (an older ledger, or one edited by hand): the next save gives it one."""
        return self._saved is None or _dump(self._data) != self._saved

    def save(self, *, durable: bool = True) -> None:
        """Write the ledger atomically: a temporary file in the same folder, then ``os.replace``.

        ``durable`` also ``fsync``s the file before the rename and the folder after it, so that the new content
        survives a crash of the machine. Without it the write is still atomic for every reader and safe when the
        process is killed (``kill -9``: the kernel keeps the written pages); :meth:`sync` makes it durable later.
        """
        self._prune()
        self.notice_rewrite()
        self._data.saved_at = float(self._clock.now())
        body = _dump(self._data)
        _atomic_write(self.path, _signed(body), durable=durable)
        self._saved = body
        self._seen = self._stat()
        self._unsynced = not durable
        if self.fingerprint is not None and not self._pointer_written:
            pointer = self.path.parent / _LAST_FINGERPRINT
            if _read_pointer(self.path.parent) != self.fingerprint:
                _atomic_write(pointer, self.fingerprint.encode("ascii") + b"\n", durable=durable)
                self._unsynced_pointer = not durable
            self._pointer_written = True
        if durable:
            self.sync()  # a pointer written by an earlier step's save

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

    def _prune(self) -> None:
        # Keep a request only as long as a window it counts in can still need it: the global minute, and the
        # endpoint's own period.
        now = self._clock.now()
        for endpoint in list(self._data.sent):
            own = limit_for(endpoint)
            keep = max(MINUTE, own.period if own else 0)
            kept = [entry for entry in self._data.sent[endpoint] if entry[0] > now - keep]
            if kept:
                self._data.sent[endpoint] = kept
            else:
                del self._data.sent[endpoint]
        for endpoint, record in list(self._data.headers.items()):
            if record.reset < now - GLOBAL_LIMIT.period and record.learnt_at < now - LONGEST_PERIOD:
                del self._data.headers[endpoint]

    # --- rate limits -----------------------------------------------------------------------------------------

    def record_sent(self, endpoint: str) -> None:
        """Count one request to ``endpoint`` (``"METHOD /path"``), sent now."""
        self._data.seq += 1
        self._data.sent.setdefault(endpoint, []).append((float(self._clock.now()), self._data.seq))

    def record_unsent(self, endpoint: str) -> None:
        """The last request recorded to ``endpoint`` never left (no connection): it is not counted."""
        sent = self._data.sent.get(endpoint)
        if sent:
            sent.pop()
            if not sent:
                del self._data.sent[endpoint]

    @property
    def sequence(self) -> int:
        """The number of the last request recorded (each :meth:`record_sent` counts one up)."""
        return self._data.seq

    def sent_after(self, endpoint: str, sequence: int) -> int:
        """How many requests to ``endpoint`` were recorded after request number ``sequence``."""
        return sum(1 for _, seq in self._data.sent.get(endpoint, ()) if seq > sequence)

    def record_response(self, endpoint: str, status: int, headers: Mapping[str, str]) -> None:
        """Keep the ``X-RateLimit-*`` headers of a response, if it carried all three as sane numbers.

        ``X-RateLimit-Reset`` is read by :func:`reset_time` (epoch seconds or milliseconds, or seconds from now,
        at most a day ahead); a value that is not a finite number makes the three headers be ignored.

        A response's ``Accept-Encoding`` naming ``deflate`` (RFC 7694: the content codings the server reads in
        requests, which the stand-in sends) is remembered as the compression probe's answer would be.
        """
        if self._data.compression != "accepted" and _advertises_deflate(_header(headers, "Accept-Encoding")):
            self.record_compression(True)
        limit = _int(_header(headers, "X-RateLimit-Limit"))
        remaining = _int(_header(headers, "X-RateLimit-Remaining"))
        reset = header_number(_header(headers, "X-RateLimit-Reset"))
        if limit is None or remaining is None or reset is None or limit < 0:
            return
        now = float(self._clock.now())
        reset_at = float(reset_time(float(int(reset)), now))
        self._data.headers[endpoint] = _Headers(
            limit=limit, remaining=remaining, reset=reset_at, learnt_at=now, status=status, seq=self._data.seq
        )

    def sent_times(self, endpoint: str, seconds: float) -> list[float]:
        """When the requests of the last ``seconds`` to ``endpoint`` (or to any, for ``GLOBAL_KEY``) were sent."""
        since = self._clock.now() - seconds
        return sorted(t for t, _ in self._sent_to(endpoint) if t > since)

    def _sent_to(self, key: str) -> list[tuple[float, int]]:
        if key == GLOBAL_KEY:
            return [entry for entries in self._data.sent.values() for entry in entries]
        return list(self._data.sent.get(key, []))

    def windows(self) -> dict[str, WindowState]:
        """What is known to remain now of the global window and of every endpoint window in the limits table.

        From headers while their window has not reset (less the requests sent since they arrived); otherwise by
        counting this tool's requests in the window's period (after the last known reset). Requests made with the
        same token by other tools are only seen through headers.
        """
        now = self._clock.now()
        out: dict[str, WindowState] = {}
        for key, limit in [(GLOBAL_KEY, GLOBAL_LIMIT), *ENDPOINT_LIMITS.items()]:
            out[key] = self._window(key, limit, now)
        return out

    def _window(self, key: str, limit: Limit, now: float) -> WindowState:
        records = [r for endpoint, r in self._data.headers.items() if window_key(endpoint, r.limit) == key]
        latest = max(records, key=lambda r: (r.learnt_at, r.seq), default=None)
        sent = self._sent_to(key)
        if latest is not None and latest.reset > now:
            since = sum(1 for _, seq in sent if seq > latest.seq)
            return WindowState(
                key, latest.limit, max(0, latest.remaining - since), latest.reset, latest.learnt_at, "headers"
            )
        floor = now - limit.period
        if latest is not None:
            # Requests before the last known reset were counted in a window that is over.
            floor = max(floor, latest.reset)
        times = sorted(t for t, _ in sent if t > floor)
        reset = times[0] + limit.period if times else now + limit.period
        return WindowState(key, limit.count, max(0, limit.count - len(times)), reset, now, "counted")

    @property
    def unlimited_until(self) -> float | None:
        """UTC epoch second at which the token's unlimited period ends (``None``: not known to be unlimited)."""
        return self._data.unlimited_until

    def set_unlimited_until(self, until: float | None) -> None:
        """Record the end of the token's unlimited period (from the token query), or ``None`` for none."""
        self._data.unlimited_until = None if until is None else float(until)

    #: How long the token query's scope is believed before it is asked again (a token's scope rarely changes).
    SCOPE_SECONDS = 86400.0

    def remember_scope(self, full: bool, endpoints: tuple[str, ...]) -> None:
        """Record what the token may use (the token query's answer)."""
        self._data.scope_full = full
        self._data.scope_endpoints = sorted(endpoints)
        self._data.scope_at = float(self._clock.now())

    def scope(self) -> tuple[bool, frozenset[str]] | None:
        """Full access, or the endpoints the token may use, as learnt less than :attr:`SCOPE_SECONDS` ago."""
        at = self._data.scope_at
        if self._data.scope_full is None or at is None or self._clock.now() - at > self.SCOPE_SECONDS:
            return None
        return self._data.scope_full, frozenset(self._data.scope_endpoints)

    #: How long a refusal of compressed bodies is believed before the server is asked again (it may be upgraded).
    COMPRESSION_REFUSAL_DAYS = 30

    def compression(self) -> bool | None:
        """Whether the server is known to read compressed bodies; ``None`` when it has not been asked (or a refusal
        is older than :attr:`COMPRESSION_REFUSAL_DAYS`)."""
        state, at = self._data.compression, self._data.compression_at
        if state == "accepted":
            return True
        if state == "refused" and at is not None and self._clock.now() - at < self.COMPRESSION_REFUSAL_DAYS * 86400:
            return False
        return None

    def record_compression(self, accepted: bool | None) -> None:
        """Remember the probe's answer (``None`` forgets it: the next run that uploads asks again)."""
        self._data.compression = None if accepted is None else ("accepted" if accepted else "refused")
        self._data.compression_at = None if accepted is None else float(self._clock.now())

    # --- branches --------------------------------------------------------------------------------------------

    def remember_branch(self, branch: RemoteBranch) -> None:
        """Keep what is known of a branch: module digests and sizes, never their text."""
        modules = None
        if branch.modules is not None:
            modules = {
                name: _Module(digest=m.digest, size=m.size, binary=m.is_binary) for name, m in branch.modules.items()
            }
        self._data.branches[branch.name] = _Branch(
            exists=branch.exists,
            digest=branch.digest,
            modules=modules,
            learnt_at=float(branch.learnt_at),
            how=branch.how,
            stamp=branch.stamp,
        )

    def stamp_branch(self, name: str, stamp: str | None) -> None:
        """Set the server's modification stamp of the branch's record (listed just before it was downloaded)."""
        record = self._data.branches.get(name)
        if record is not None:
            record.stamp = stamp

    def forget_branch(self, name: str) -> None:
        """Drop what is known of a branch (its state changed in a way the tool cannot reproduce)."""
        self._data.branches.pop(name, None)

    def remembered_branch(self, name: str) -> RemoteBranch | None:
        """The last known state of a branch, with when and how it was learnt; module facts carry no text."""
        record = self._data.branches.get(name)
        if record is None:
            return None
        if not record.exists or record.modules is None:
            return RemoteBranch.missing(name, record.learnt_at, record.how, record.stamp)
        made = self._facts.get(name)
        if made is None or made[0] is not record.modules:
            # Built once per record: a plan asks for the same branch several times (2,000 modules: ~5 ms each).
            # A record's modules are never changed in place (remember_branch makes a new record), and the cache
            # holds the map it was built from, so the identity check cannot match another map.
            made = (record.modules, _module_facts(record.modules))
            self._facts[name] = made
        return RemoteBranch(name, made[1], record.digest, record.learnt_at, record.how, record.stamp)

    def knows_branch(self, name: str) -> bool:
        """Whether the ledger has a record of the branch (that it exists, or that it did not): as
        ``remembered_branch(name) is not None``, without building its module facts."""
        return name in self._data.branches

    def remembered_digest(self, name: str) -> str | None:
        """The digest of the code the branch was last known to hold (:attr:`CodeSet.digest`); ``None`` when it is
        not known or the branch did not exist. As :meth:`remembered_branch` without building its module facts."""
        record = self._data.branches.get(name)
        if record is None or not record.exists or record.modules is None:
            return None
        return record.digest

    def remember_branch_list(self, branches: list[BranchInfo]) -> None:
        """Keep the account's branch list with its active flags, as learnt now."""
        self._data.branch_list = _BranchList(
            learnt_at=float(self._clock.now()),
            branches=[
                _BranchEntry(name=b.name, active_world=b.active_world, active_sim=b.active_sim) for b in branches
            ],
        )

    def remember_clone(self, name: str) -> None:
        """The tool created branch ``name``: what it holds is the server's copy (the next plan downloads it, or
        apply uploads), and the known branch list gains it."""
        self.forget_branch(name)
        known = self.remembered_branch_list()
        if known is not None and all(b.name != name for b in known[0]):
            self.remember_branch_list([*known[0], BranchInfo(name)])

    def remember_activation(self, name: str, which: ActiveName) -> None:
        """The tool made ``name`` the active branch for the world or the simulation.

        For a token without ``GET /api/user/branches`` this record is all the tool will know of activation, and the
        list may hold only what the tool itself cloned or activated: the branch is added when it is missing.
        """
        known = self.remembered_branch_list()
        branches = list(known[0]) if known is not None else []
        if all(b.name != name for b in branches):
            branches.append(BranchInfo(name))
        self.remember_branch_list(
            [
                BranchInfo(
                    b.name,
                    b.name == name if which == "world" else b.active_world,
                    b.name == name if which == "sim" else b.active_sim,
                )
                for b in branches
            ]
        )

    # --- what this tool last applied (drift) -------------------------------------------------------------------

    def record_applied(self, record: AppliedRecord) -> None:
        """This tool made the branch hold ``record`` (an upload that succeeded, or a plan that found the server
        equal to the repository); a pending upload of the branch is settled by it."""
        self._data.applied[record.branch] = _applied(record)
        self._data.pending.pop(record.branch, None)

    def record_pending(self, record: AppliedRecord) -> None:
        """An upload of ``record`` is about to be sent: if its answer is lost, finding it on the server is no
        drift."""
        self._data.pending[record.branch] = _applied(record)

    def applied(self, name: str) -> AppliedRecord | None:
        """The last applied record of branch ``name``, or ``None`` when this tool never applied it."""
        return _record(name, self._data.applied.get(name))

    def pending(self, name: str) -> AppliedRecord | None:
        """The set of an upload to ``name`` whose outcome is not known, or ``None``."""
        return _record(name, self._data.pending.get(name))

    # --- deployment state (issue 39) ---------------------------------------------------------------------------

    def record_verification(self, record: VerifyRecord) -> None:
        """The verification state of ``record.branch``'s last deploy (replacing the one before; saved by the
        caller at once). The newest deploy of the branch in the history takes the same state."""
        self._data.verifications[record.branch] = _Verify(
            record.state,
            record.digest,
            record.commit,
            float(record.applied_at),
            float(record.recorded_at),
            record.reason,
            record.undo,
            record.restore_digest,
            record.standby,
            list(record.standby_for),
        )
        self._set_history(with_state(self.history(), record.branch, record.state))

    def forget_verification(self, branch: str) -> None:
        """A new deploy of ``branch`` replaces its verification state (one without ``verify:`` leaves none)."""
        self._data.verifications.pop(branch, None)

    def verification(self, branch: str) -> VerifyRecord | None:
        stored = self._data.verifications.get(branch)
        if stored is None:
            return None
        return VerifyRecord(
            branch,
            stored.state,
            stored.digest,
            stored.commit,
            stored.applied_at,
            stored.recorded_at,
            stored.reason,
            stored.undo,
            stored.restore_digest,
            stored.standby,
            tuple(stored.standby_for),
        )

    def verifications(self) -> list[VerifyRecord]:
        """Every branch's verification record, by branch name."""
        return [r for name in sorted(self._data.verifications) if (r := self.verification(name)) is not None]

    def record_deploy(self, deploy: Deploy) -> Deploy:
        """Add ``deploy`` to the history (numbered next; the oldest dropped past the limit); the numbered one."""
        history = add_deploy(self.history(), deploy)
        self._set_history(history)
        return history[-1]

    def history(self) -> list[Deploy]:
        """The recorded deploys, oldest first."""
        return [Deploy(d.n, d.branch, d.digest, d.commit, d.applied_at, d.how, d.state) for d in self._data.history]

    def _set_history(self, history: list[Deploy]) -> None:
        self._data.history = [
            _Deploy(d.n, d.branch, d.digest, d.commit, float(d.applied_at), d.how, d.state) for d in history
        ]

    def remembered_branch_list(self) -> tuple[list[BranchInfo], float] | None:
        """The last known branch list and when it was learnt, or ``None``."""
        record = self._data.branch_list
        if record is None:
            return None
        return [BranchInfo(b.name, b.active_world, b.active_sim) for b in record.branches], record.learnt_at


def _applied(record: AppliedRecord) -> _Applied:
    return _Applied(
        digest=record.digest,
        modules={n: _Module(digest=m.digest, size=m.size, binary=m.is_binary) for n, m in record.modules.items()},
        applied_at=float(record.applied_at),
        how=record.how,
        commit=record.commit,
        source=record.source,
    )


def _record(name: str, stored: _Applied | None) -> AppliedRecord | None:
    if stored is None:
        return None
    from gitops.core.drift import AppliedRecord

    facts = _module_facts(stored.modules)
    return AppliedRecord(name, facts, stored.digest, stored.applied_at, stored.how, stored.commit, stored.source)


def _module_facts(modules: dict[str, _Module]) -> dict[str, ModuleFacts]:
    """A stored module map as the facts the rest of the tool reads (digests and sizes, no text)."""
    return {n: ModuleFacts(n, m.digest, m.size, m.binary) for n, m in modules.items()}


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
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
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
