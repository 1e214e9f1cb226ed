"""What the tool knows of a server, and the two views of it that planning and applying get.

Planning gets a :class:`RemoteReader` (read-only); applying gets a :class:`RemoteWriter`. The HTTP client
(``gitops.edges.service.ServiceClient``) implements both; these types are pure data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from gitops.config.manifest import ActiveName
from gitops.core.codeset import CodeSet, WireModule

#: How the tool learnt the state of a branch: a download now, its own upload (from the ledger), or the ledger.
Provenance = Literal["download", "own-upload", "ledger"]

#: What a plan's statement about a branch rests on now: verified by a download or by the branch list of this run,
#: or taken unverified from this tool's own upload record or an older ledger record; ``unknown``: nothing.
Basis = Literal["download", "branch-list", "own-upload", "ledger", "unknown"]
VERIFIED: frozenset[str] = frozenset({"download", "branch-list"})


def normal_stamp(value: Any) -> str | None:
    """A server's modification time of a branch (``timestamp``: epoch milliseconds, or an ISO string on some private
    servers) as an opaque token compared only for equality; ``None`` when there is none usable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) < 10**15:
        return str(value)
    if isinstance(value, float) and math.isfinite(value) and abs(value) < 1e15:
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str) and 0 < len(value) <= 64:
        return value
    return None


@dataclass(frozen=True, slots=True)
class BranchInfo:
    """A branch of the account, as ``GET /api/user/branches`` lists it.

    ``stamp`` is the branch's modification time as the server lists it (:func:`normal_stamp`), ``modules`` its
    modules in wire form when the list carries them (the private server's and the stand-in's do): kept unparsed, so
    that only the branches a plan needs are read and hashed.
    """

    name: str
    active_world: bool = False
    active_sim: bool = False
    stamp: str | None = None
    modules: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def is_active(self, which: ActiveName) -> bool:
        return self.active_world if which == "world" else self.active_sim


def branch_list(data: Mapping[str, Any]) -> list[BranchInfo] | None:
    """The branches of an answer to ``GET /api/user/branches`` (its JSON object); ``None`` when its ``list`` is not a
    list of branches. The private server's entries carry each branch's modules, and its active flags may be missing
    ("not true" is inactive); both it and the stand-in give a modification time (``timestamp``)."""
    raw = data.get("list")
    if not isinstance(raw, list) or not all(isinstance(b, dict) and isinstance(b.get("branch"), str) for b in raw):
        return None
    return [
        BranchInfo(
            b["branch"],
            b.get("activeWorld") is True,
            b.get("activeSim") is True,
            normal_stamp(b.get("timestamp")),
            b["modules"] if isinstance(b.get("modules"), dict) else None,
        )
        for b in raw
    ]


@dataclass(frozen=True, slots=True)
class ModuleFacts:
    """What is known of one module on the server: always digest and size, the content when downloaded."""

    name: str
    digest: str
    size: int
    is_binary: bool
    text: str | None = None


@dataclass(frozen=True, slots=True)
class RemoteBranch:
    """The server's state of one branch. ``modules`` is ``None`` when the branch does not exist."""

    name: str
    modules: Mapping[str, ModuleFacts] | None
    digest: str | None
    learnt_at: float
    how: Provenance
    #: The server's modification stamp of the branch when this state was learnt (:func:`normal_stamp`), if known.
    stamp: str | None = None
    #: What the statement rests on in this run (``None``: as ``how`` says, unverified unless a download).
    basis: Basis | None = None
    #: When it was last verified (a download or the branch list), if in this run.
    checked_at: float | None = None

    @property
    def exists(self) -> bool:
        return self.modules is not None

    @property
    def verified(self) -> bool:
        """Whether this run checked the state on the server (a download, or the branch list)."""
        return self.current_basis in VERIFIED

    @property
    def current_basis(self) -> Basis:
        if self.basis is not None:
            return self.basis
        return "download" if self.how == "download" else self.how

    @classmethod
    def missing(
        cls, name: str, learnt_at: float, how: Provenance = "download", stamp: str | None = None
    ) -> RemoteBranch:
        return cls(name, None, None, learnt_at, how, stamp)

    @classmethod
    def from_code(
        cls, name: str, code: CodeSet, learnt_at: float, how: Provenance = "download", stamp: str | None = None
    ) -> RemoteBranch:
        facts = {m.name: ModuleFacts(m.name, m.digest, m.size, m.is_binary, m.text) for m in code.modules.values()}
        return cls(name, facts, code.digest, learnt_at, how, stamp)


#: What planning does for one branch (:func:`how_to_learn`): take it from the branch list's modules, call it missing
#: (the list does not have it), take the ledger's record as confirmed by the list's unchanged stamp, take the record
#: unverified (``--refresh=never``, or this tool's own upload within the trust window when the list says nothing
#: usable), or download it.
Judgement = Literal["list", "missing", "confirmed", "unverified", "download"]


def how_to_learn(
    remembered: RemoteBranch | None,
    listed: BranchInfo | None,
    *,
    listing_known: bool,
    refresh: str,
    needs_content: bool,
    trust_seconds: float,
    now: float,
) -> Judgement:
    """How planning learns one branch, spending as little as the refresh policy allows and never stating as
    current what the server's list shows has changed.

    ``listing_known``: this run has the account's branch list (``listed`` is the branch's entry, ``None`` when the
    list does not have it). ``needs_content``: the plan needs module texts, not only digests (``remote_only:
    keep``). ``refresh=always`` downloads, ``never`` takes the record (no request).
    """
    if refresh == "never":
        return "unverified"
    if listing_known and listed is None:
        return "missing"
    if refresh == "always":
        return "download"
    if listed is not None and listed.modules is not None:
        return "list"
    usable = remembered is not None and remembered.modules is not None and not needs_content
    if not usable or remembered is None:
        return "download"
    if listed is not None and listed.stamp is not None and remembered.stamp is not None:
        # The server says when the branch last changed: the record holds exactly when it was learnt at that stamp.
        return "confirmed" if listed.stamp == remembered.stamp else "download"
    if remembered.how == "own-upload" and now - remembered.learnt_at <= trust_seconds:
        return "unverified"
    return "download"


@dataclass(frozen=True, slots=True)
class RemoteView:
    """What the planner knows of one server: its branch list (``None``: unknown) and the branches it needs.

    ``branches`` maps each branch name of the manifest to its state, or to ``None`` when nothing is known of it
    (planning from an empty ledger).
    """

    server: str
    branch_list: tuple[BranchInfo, ...] | None
    branches: Mapping[str, RemoteBranch | None]
    learnt_at: float | None = None

    def info(self, name: str) -> BranchInfo | None:
        for entry in self.branch_list or ():
            if entry.name == name:
                return entry
        return None


class RemoteReader(Protocol):
    """Read-only access to one server account."""

    def list_branches(self) -> list[BranchInfo]:
        """All branches of the account with their active flags."""
        ...

    def get_code(self, branch: str) -> CodeSet | None:
        """The modules of ``branch``, or ``None`` when the branch does not exist."""
        ...


class RemoteWriter(RemoteReader, Protocol):
    """Read and write access to one server account."""

    def upload_code(self, branch: str, modules: Mapping[str, WireModule], *, resend_if_lost: bool = True) -> None:
        """Replace every module of ``branch`` (``POST /api/user/code``); ``resend_if_lost=False``: not sent again
        after a failure that may have reached the server."""
        ...

    def clone_branch(
        self, new_name: str, source: str | None = None, modules: Mapping[str, WireModule] | None = None
    ) -> None:
        """Create ``new_name`` (``POST /api/user/clone-branch``) holding ``modules`` (``defaultModules``), or a
        copy of ``source``; the server's default modules when neither is given."""
        ...

    def set_active_branch(self, branch: str, which: ActiveName) -> None:
        """Make ``branch`` the active branch for the world or the simulation."""
        ...
