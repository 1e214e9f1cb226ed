"""Drift: a branch whose server code differs from what this tool last applied there, changed outside Git.

The ledger keeps, per branch, the *last applied* record: the module set this tool last made the branch hold (an
upload that succeeded) or last found it holding when that was exactly the repository's code (a plan that downloaded
the branch and had nothing to change). It is kept apart from the *last known* state, which every download
overwrites. Before an upload the tool also records the set it is about to send (*pending*): an upload whose answer
was lost may still have landed, and finding that set on the server is then no drift.

Everything here is pure: records and findings are values, :func:`compare` decides. The plan carries a
:class:`Drift` per branch (``BranchPlan.drift``); ``gitops drift`` reports them on their own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitops.core.applied import AppliedHow, AppliedRecord
from gitops.core.codeset import CodeSet, WireModule, module_from_wire, set_digest, text_facts
from gitops.core.deploys import UnsettledDeploy
from gitops.core.driftfinding import Drift
from gitops.core.remote import ModuleFacts, RemoteBranch

if TYPE_CHECKING:  # for the annotations only: a ledger takes its records from here without the plan's modules
    from gitops.core.plan import BranchPlan, Plan

#: The JSON document of ``gitops drift --json``; a later incompatible change raises it.
DRIFT_FORMAT_VERSION = 1


def source_text(source: Mapping[str, str | bool | None]) -> str:
    """``ref main``, ``rollback to deploy #2``, ``worktree`` or ``worktree (uncommitted changes)``: where a plan's
    code came from."""
    if source.get("kind") == "ref":
        return f"ref {source.get('ref')}"
    if source.get("kind") == "rollback":
        return f"rollback to {source.get('ref')}"
    return "worktree (uncommitted changes)" if source.get("dirty") else "worktree"


def source_commit(source: Mapping[str, str | bool | None]) -> str | None:
    """The commit a plan's code came from, when known."""
    commit = source.get("commit")
    return commit if isinstance(commit, str) else None


def record_from_wire(
    branch: str,
    modules: Mapping[str, WireModule],
    *,
    at: float,
    how: AppliedHow,
    commit: str | None = None,
    source: str | None = None,
) -> AppliedRecord:
    """The record of a module set as sent to the server (the payload of an upload): what
    ``record_from_branch(RemoteBranch.from_code(branch, CodeSet.from_wire(modules), at))`` gives, made without the
    module objects (an upload's record is on the way to the upload, so it is made the cheap way).

    Raises ``ValueError`` for a value that is not a module (:func:`module_from_wire`)."""
    facts: dict[str, ModuleFacts] = {}
    for key, value in modules.items():
        name = str(key)
        if isinstance(value, str):
            digest, size = text_facts(value)
            facts[name] = ModuleFacts(name, digest, size, False)
        else:
            module = module_from_wire(name, value)
            facts[name] = ModuleFacts(name, module.digest, module.size, module.is_binary)
    digest = set_digest((name, facts[name].digest) for name in sorted(facts))
    return AppliedRecord(branch, facts, digest, at, how, commit, source)


def record_from_branch(
    seen: RemoteBranch, *, how: AppliedHow, commit: str | None = None, source: str | None = None
) -> AppliedRecord:
    """The record of a branch's state (which must exist): digests and sizes, the text dropped."""
    if seen.modules is None or seen.digest is None:
        raise ValueError(f"branch {seen.name!r} does not exist: only an existing branch can be applied")
    # Facts without text are taken as they are (frozen; a branch confirmed from the ledger has 2,000 of them).
    facts = {
        n: f if f.text is None else ModuleFacts(f.name, f.digest, f.size, f.is_binary) for n, f in seen.modules.items()
    }
    return AppliedRecord(seen.name, facts, seen.digest, seen.learnt_at, how, commit, source)


@dataclass(frozen=True, slots=True)
class RepositoryCode:
    """What the repository says a branch should hold: its modules, where they were read (``worktree``, ``ref
    main``), and whether the server may hold more (``remote_only: keep``)."""

    code: CodeSet
    source: str
    keeps_server_only: bool = False

    def held_by(self, current: RemoteBranch) -> bool:
        """Whether the server's branch holds exactly this code (and, with ``keeps_server_only``, maybe more)."""
        if current.modules is None:
            return False
        if not self.keeps_server_only:
            return current.digest == self.code.digest
        held = current.modules
        return all(name in held and held[name].digest == m.digest for name, m in self.code.modules.items())


def compare(
    current: RemoteBranch | None,
    applied: AppliedRecord | None,
    pending: AppliedRecord | None = None,
    repository: RepositoryCode | None = None,
) -> Drift:
    """Compare what the server holds now with the last applied record, a pending upload's set, and the
    repository's code: equal to any of them is no drift (whichever machine applied it); equal to none is."""
    if applied is None:
        return Drift(status="no-record")
    # What every finding against the record states; float(): a ledger's JSON may hold a whole number.
    unknown = Drift(
        status="unknown",
        applied_at=float(applied.applied_at),
        applied_how=applied.how,
        commit=applied.commit,
        repository=repository.source if repository is not None else None,
    )
    # Only a state this run checked on the server (a download, or the branch list's modules or unchanged stamp)
    # can show drift; a record from the ledger says nothing of edits made since.
    if current is None or not current.verified:
        return unknown
    if current.modules is None:
        return dataclasses.replace(unknown, status="drifted", removed=sorted(applied.modules), missing=True)
    if current.digest == applied.digest:
        return dataclasses.replace(unknown, status="none")
    if pending is not None and current.digest == pending.digest:
        return dataclasses.replace(
            unknown,
            status="none",
            applied_at=float(pending.applied_at),
            applied_how=pending.how,
            commit=pending.commit,
            pending_landed=True,
        )
    if repository is not None and repository.held_by(current):
        return dataclasses.replace(unknown, status="none", equals_repository=True)
    now, then = current.modules, applied.modules
    return dataclasses.replace(
        unknown,
        status="drifted",
        added=sorted(set(now) - set(then)),
        changed=sorted(n for n in set(now) & set(then) if now[n].digest != then[n].digest),
        removed=sorted(set(then) - set(now)),
    )


def equal_to_repository(branch: BranchPlan) -> bool:
    """Whether the plan verified, on the server now, that the branch holds exactly the repository's code (then
    the tool records it as applied: ``verified``)."""
    return (
        branch.remote.verified
        and branch.remote.exists is True
        and not (branch.names("added") or branch.names("changed") or branch.names("removed"))
    )


def with_drift(plan: Plan, drifts: Mapping[tuple[str, str], Drift]) -> Plan:
    """The plan with each branch's drift finding attached (``BranchPlan.drift``)."""
    branches = [
        dataclasses.replace(b, drift=drifts[(b.server, b.branch)]) if (b.server, b.branch) in drifts else b
        for b in plan.branches
    ]
    return dataclasses.replace(plan, branches=branches)


@dataclass(frozen=True, slots=True)
class BranchDrift:
    """One branch of ``gitops drift``'s report."""

    server: str
    branch: str
    drift: Drift

    @property
    def label(self) -> str:
        return f"{self.server}/{self.branch}"


@dataclass(frozen=True, slots=True)
class DriftReport:
    """What ``gitops drift`` found: every branch of the manifest with its finding, and warnings."""

    branches: tuple[BranchDrift, ...]
    checked_at: float
    warnings: tuple[str, ...] = ()
    #: Branches whose last deploy is unverified or failing (issue 39; exit code 12).
    unsettled: tuple[UnsettledDeploy, ...] = ()

    @property
    def drifted(self) -> list[BranchDrift]:
        return [b for b in self.branches if b.drift.drifted]

    @property
    def has_drift(self) -> bool:
        return bool(self.drifted)
