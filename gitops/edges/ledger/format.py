"""The ledger's file format: the JSON of one ledger file, its version, and how it is read and written.

The file is a tree of plain mutable dataclasses, not pydantic models: a file gitops wrote itself is rebuilt straight
from its JSON without importing pydantic, and written by orjson in the field order pydantic's ``model_dump_json``
used, so that the bytes stay those of format version 1. Every file gitops writes ends with a ``check`` (SHA-256 of
the rest, see :data:`CHECK_HEAD`): a file whose check verifies was written from validated data and is built as it
is; any other file (an older ledger without the field, one edited by hand, a damaged one) is validated by pydantic,
imported only then, and is loaded when valid or set aside when not. A file of another version is never read.
Modules are kept as digests and sizes, never their text; the token only names the file (by its fingerprint).
Layout and format: ``docs/budget-and-ledger.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

import orjson

from gitops.core.applied import AppliedHow, AppliedRecord
from gitops.core.codeset import request_body
from gitops.core.deploys import Deploy, DeployHow, VerifyRecord, VerifyState
from gitops.core.remote import ModuleFacts, Provenance

if TYPE_CHECKING:  # at run time imported by validated only (see there)
    from pydantic import Field

__all__ = [
    "CHECK_HEAD",
    "FORMAT_VERSION",
    "AppliedEntry",
    "BranchEntry",
    "BranchListEntry",
    "DeployEntry",
    "HeadersEntry",
    "LedgerData",
    "ListedBranch",
    "ModuleEntry",
    "NotALedger",
    "VerifyEntry",
    "applied_entry",
    "applied_record",
    "checked_body",
    "decode",
    "deploy_entries",
    "deploys",
    "dump",
    "module_entries",
    "module_facts",
    "signed",
    "trailing_digest",
    "verify_entry",
    "verify_record",
]

#: Version of the ledger file format; a file of another version is set aside, not read.
FORMAT_VERSION: Final = 1

# Dataclasses do not convert what they are given as pydantic did: the code that fills them passes times through
# ``float()``, so that a whole second is written ``1800000000.0`` as before, never ``1800000000``. No ``slots``:
# orjson writes a dataclass with a ``__dict__`` faster than one with slots. pydantic validates a file that does not
# verify through ``pydantic.TypeAdapter(LedgerData)`` (the constraints are ``pydantic.Field``'s, the configuration
# ``__pydantic_config__``).

#: pydantic's configuration of every class of the file (unknown keys make a file "not shaped as a ledger").
_FORBID: dict[str, Any] = {"extra": "forbid"}


@dataclass
class HeadersEntry:
    __pydantic_config__ = _FORBID
    limit: Annotated[int, Field(ge=0)]
    remaining: int
    reset: float
    learnt_at: float
    status: int
    #: Sequence number of the last request sent when these headers arrived: later requests are subtracted.
    seq: int


@dataclass
class ModuleEntry:
    __pydantic_config__ = _FORBID
    digest: str
    size: Annotated[int, Field(ge=0)]
    binary: bool


@dataclass
class BranchEntry:
    __pydantic_config__ = _FORBID
    exists: bool
    digest: str | None
    modules: dict[str, ModuleEntry] | None
    learnt_at: float
    how: Provenance
    #: The server's modification stamp of the branch when this was learnt (the branch list's ``timestamp``, or the
    #: upload's answer): a later list showing the same stamp confirms the record without a download.
    stamp: str | None = None


@dataclass
class AppliedEntry:
    """What this tool last applied to a branch (``gitops.core.applied.AppliedRecord``): digests, never text."""

    __pydantic_config__ = _FORBID
    digest: str
    modules: dict[str, ModuleEntry]
    applied_at: float
    how: AppliedHow
    commit: str | None = None
    source: str | None = None


@dataclass
class VerifyEntry:
    """A branch's verification state (``gitops.core.deploys.VerifyRecord``); the code to restore is kept beside the
    ledger (``edges/codestore.py``), here only its digest."""

    __pydantic_config__ = _FORBID
    state: VerifyState
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
class DeployEntry:
    """One deploy of the history (``gitops.core.deploys.Deploy``): digests, never text."""

    __pydantic_config__ = _FORBID
    n: int
    branch: str
    digest: str | None
    commit: str | None
    applied_at: float
    how: DeployHow = "apply"
    state: VerifyState | None = None


@dataclass
class ListedBranch:
    __pydantic_config__ = _FORBID
    name: str
    active_world: bool = False
    active_sim: bool = False


@dataclass
class BranchListEntry:
    __pydantic_config__ = _FORBID
    learnt_at: float
    branches: list[ListedBranch]


@dataclass
class LedgerData:
    __pydantic_config__ = _FORBID
    format_version: Literal[1]
    server_url: str
    fingerprint: str | None
    saved_at: float
    seq: int = 0
    headers: dict[str, HeadersEntry] = field(default_factory=dict)
    #: endpoint -> [[sent at, sequence number], ...], oldest first.
    sent: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    branches: dict[str, BranchEntry] = field(default_factory=dict)
    branch_list: BranchListEntry | None = None
    unlimited_until: float | None = None
    #: Per branch: the last applied record (drift is measured against it); never overwritten by downloads.
    applied: dict[str, AppliedEntry] = field(default_factory=dict)
    #: Per branch: the set of an upload about to be sent, until it is known to have landed (a lost answer).
    pending: dict[str, AppliedEntry] = field(default_factory=dict)
    #: Whether the server reads compressed request bodies (learnt by the probe, ``gitops.edges.service``), and when.
    compression: Literal["accepted", "refused"] | None = None
    compression_at: float | None = None
    #: What the token may use, from the token query: ``None`` unknown, else full access or these endpoint keys.
    scope_full: bool | None = None
    scope_endpoints: list[str] = field(default_factory=list)
    scope_at: float | None = None
    #: Per branch: the verification state of its last deploy (issue 39; absent in older ledgers: none recorded).
    verifications: dict[str, VerifyEntry] = field(default_factory=dict)
    #: The deploys this tool made, oldest first, at most ``gitops.core.deploys.HISTORY_LIMIT``.
    history: list[DeployEntry] = field(default_factory=list)


# --- the check: written by gitops, or not ------------------------------------------------------------------------

#: The integrity field gitops appends to every ledger it writes: ``,"check":"sha256:<64 hex digits>"}`` closes the
#: file (then a newline), and the digest is SHA-256 of the file's bytes without that member, i.e. of the compact JSON
#: object of the data exactly as written. Hashing the written bytes (not a re-serialization of the parsed value)
#: makes checking cost one pass of SHA-256, needs no canonical form that two JSON writers must agree on, and catches
#: any change to the file, even one that leaves it valid JSON. It is an integrity check, not a signature: it tells
#: "written by gitops from validated data" from "edited, truncated or written by something else", and anyone able to
#: write the state folder can also write a matching digest.
CHECK_HEAD = b',"check":"sha256:'
_CHECK_TAIL = b'"}\n'
_CHECK_LENGTH = len(CHECK_HEAD) + 64 + len(_CHECK_TAIL)
_HEX = frozenset(b"0123456789abcdef")


def dump(data: LedgerData) -> bytes:
    """The compact JSON of ``data`` (without ``check``), as pydantic's ``model_dump_json`` wrote it.

    A lone surrogate (a branch or module name the server sent as an unpaired ``\\udXXX`` escape) cannot be UTF-8,
    which orjson refuses: the standard library writes the file then, with the surrogate as its escape, so that the
    name reads back unchanged (pydantic wrote it as U+FFFD replacement characters, a name no branch has).
    """
    try:
        return orjson.dumps(data)
    except TypeError:  # orjson.JSONEncodeError
        return request_body(asdict(data))


def signed(body: bytes) -> bytes:
    """The file's bytes: ``body`` with the ``check`` member appended (see :data:`CHECK_HEAD`)."""
    digest = hashlib.sha256(body).hexdigest().encode("ascii")
    return body[:-1] + CHECK_HEAD + digest + _CHECK_TAIL


def _verifies(raw: bytes) -> bool:
    """Whether ``raw`` ends with a ``check`` member that matches the rest (then gitops wrote it)."""
    return _check_head(raw) is not None


def trailing_digest(raw: bytes, head: bytes, tail: bytes) -> int | None:
    """Where ``raw`` ends with ``head``, 64 lower-case hex digits and ``tail`` (the ``check`` member, or the seal's
    before it): the position of ``head``; ``None`` when it does not."""
    length = len(head) + 64 + len(tail)
    if len(raw) <= length or not raw.endswith(tail):
        return None
    start = len(raw) - length
    if raw[start : start + len(head)] != head or not _HEX.issuperset(raw[start + len(head) : -len(tail)]):
        return None
    return start


def _check_head(raw: bytes) -> int | None:
    """Where the ``check`` member of ``raw`` begins, when it matches the rest; else ``None``."""
    head = trailing_digest(raw, CHECK_HEAD, _CHECK_TAIL)
    if head is None:
        return None
    digest = raw[head + len(CHECK_HEAD) : -len(_CHECK_TAIL)]
    hasher = hashlib.sha256(memoryview(raw)[:head])
    hasher.update(b"}")
    return head if hasher.hexdigest().encode("ascii") == digest else None


def checked_body(raw: bytes) -> bytes | None:
    """The file's bytes without its ``check`` member (the body :func:`signed` was given), when the check verifies;
    ``None`` otherwise. The seal (``gitops.edges.ledger.seal``) is read from this body."""
    head = _check_head(raw)
    return None if head is None else raw[:head] + b"}"


# --- reading a file ------------------------------------------------------------------------------------------


class NotALedger(Exception):
    """The file's bytes are no ledger of this format; ``args[0]`` says why, as the warning words it."""


def decode(raw: bytes) -> tuple[LedgerData, bool]:
    """The data of the ledger file ``raw``, and whether it was read without a ``check`` that verified (then it was
    validated); :class:`NotALedger` when it is not a ledger of this format."""
    try:
        loaded = _parse(raw)
    except ValueError:  # also json.JSONDecodeError and UnicodeDecodeError
        raise NotALedger("not valid JSON") from None
    if isinstance(loaded, dict) and loaded.get("format_version") != FORMAT_VERSION:
        raise NotALedger(f"format_version {loaded.get('format_version')!r}, expected {FORMAT_VERSION}")
    if isinstance(loaded, dict) and _verifies(raw):
        # Written by gitops from validated data: built as it is. A shape this code cannot build (which gitops
        # never writes) is validated instead.
        with contextlib.suppress(KeyError, TypeError, AttributeError, ValueError):
            return _built(loaded), False
    try:
        return _validated(loaded), True
    except ValueError:  # pydantic's ValidationError
        raise NotALedger("not shaped as a ledger") from None


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


def _validated(loaded: Any) -> LedgerData:
    """``loaded`` validated by pydantic as a ledger file (``pydantic.ValidationError``, a ``ValueError``, if it is not
    one). Only for a file whose ``check`` does not verify (an older ledger, one edited by hand, a damaged one): the
    validator is imported here, never for a ledger gitops wrote."""
    from pydantic import Field, TypeAdapter  # noqa: PLC0415 (boundary: the validator)

    # The classes' annotations are strings (``Annotated[int, Field(ge=0)]``), resolved by pydantic in this module's
    # names: ``Field`` joins them here, so that a ledger that verifies never pays pydantic's import.
    globals().setdefault("Field", Field)
    if isinstance(loaded, dict):
        loaded = {k: v for k, v in loaded.items() if k not in ("check", "seal")}
    return TypeAdapter(LedgerData).validate_python(loaded)


# --- building a file that verified, without validating it again ------------------------------------------------
#
# gitops wrote it from validated data, so it is built as it is; a missing key or a value of the wrong kind raises
# ``KeyError``/``TypeError``/``AttributeError``/``ValueError``, and :func:`decode` validates instead.


def _built(raw: dict[str, Any]) -> LedgerData:
    """The dataclasses of a file whose ``check`` verified."""
    return LedgerData(
        format_version=raw["format_version"],
        server_url=raw["server_url"],
        fingerprint=raw["fingerprint"],
        saved_at=raw["saved_at"],
        seq=raw.get("seq", 0),
        headers={e: _headers_from(h) for e, h in raw.get("headers", {}).items()},
        sent={e: [(t, n) for t, n in entries] for e, entries in raw.get("sent", {}).items()},
        branches={name: _branch_from(b) for name, b in raw.get("branches", {}).items()},
        branch_list=_branch_list_from(raw.get("branch_list")),
        unlimited_until=raw.get("unlimited_until"),
        applied={name: _applied_from(a) for name, a in raw.get("applied", {}).items()},
        pending={name: _applied_from(a) for name, a in raw.get("pending", {}).items()},
        compression=raw.get("compression"),
        compression_at=raw.get("compression_at"),
        scope_full=raw.get("scope_full"),
        scope_endpoints=list(raw.get("scope_endpoints", [])),
        scope_at=raw.get("scope_at"),
        verifications={name: _verify_from(v) for name, v in raw.get("verifications", {}).items()},
        history=[_deploy_from(d) for d in raw.get("history", [])],
    )


def _headers_from(h: dict[str, Any]) -> HeadersEntry:
    return HeadersEntry(h["limit"], h["remaining"], h["reset"], h["learnt_at"], h["status"], h["seq"])


def _modules_from(raw: dict[str, Any]) -> dict[str, ModuleEntry]:
    return {n: ModuleEntry(m["digest"], m["size"], m["binary"]) for n, m in raw.items()}


def _branch_from(b: dict[str, Any]) -> BranchEntry:
    modules = None if b["modules"] is None else _modules_from(b["modules"])
    return BranchEntry(b["exists"], b["digest"], modules, b["learnt_at"], b["how"], b.get("stamp"))


def _branch_list_from(branch_list: dict[str, Any] | None) -> BranchListEntry | None:
    if branch_list is None:
        return None
    return BranchListEntry(
        branch_list["learnt_at"],
        [
            ListedBranch(e["name"], e.get("active_world", False), e.get("active_sim", False))
            for e in branch_list["branches"]
        ],
    )


def _applied_from(raw: dict[str, Any]) -> AppliedEntry:
    return AppliedEntry(
        raw["digest"],
        _modules_from(raw["modules"]),
        raw["applied_at"],
        raw["how"],
        raw.get("commit"),
        raw.get("source"),
    )


def _verify_from(v: dict[str, Any]) -> VerifyEntry:
    return VerifyEntry(
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


def _deploy_from(d: dict[str, Any]) -> DeployEntry:
    return DeployEntry(
        d["n"], d["branch"], d["digest"], d["commit"], d["applied_at"], d.get("how", "apply"), d.get("state")
    )


# --- the records of the rest of the tool, in their file form and back ------------------------------------------


def module_entries(modules: Mapping[str, ModuleFacts]) -> dict[str, ModuleEntry]:
    """Module facts as the file keeps them (digests and sizes, no text)."""
    return {n: ModuleEntry(digest=m.digest, size=m.size, binary=m.is_binary) for n, m in modules.items()}


def module_facts(modules: dict[str, ModuleEntry]) -> dict[str, ModuleFacts]:
    """A stored module map as the facts the rest of the tool reads (digests and sizes, no text)."""
    return {n: ModuleFacts(n, m.digest, m.size, m.binary) for n, m in modules.items()}


def applied_entry(record: AppliedRecord) -> AppliedEntry:
    return AppliedEntry(
        digest=record.digest,
        modules=module_entries(record.modules),
        applied_at=float(record.applied_at),
        how=record.how,
        commit=record.commit,
        source=record.source,
    )


def applied_record(name: str, stored: AppliedEntry | None) -> AppliedRecord | None:
    if stored is None:
        return None
    facts = module_facts(stored.modules)
    return AppliedRecord(name, facts, stored.digest, stored.applied_at, stored.how, stored.commit, stored.source)


def verify_entry(record: VerifyRecord) -> VerifyEntry:
    """The verification record's file form."""
    return VerifyEntry(
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


def verify_record(branch: str, stored: VerifyEntry) -> VerifyRecord:
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


def deploy_entries(history: Iterable[Deploy]) -> list[DeployEntry]:
    return [DeployEntry(d.n, d.branch, d.digest, d.commit, float(d.applied_at), d.how, d.state) for d in history]


def deploys(entries: Iterable[DeployEntry]) -> list[Deploy]:
    return [Deploy(d.n, d.branch, d.digest, d.commit, d.applied_at, d.how, d.state) for d in entries]
