"""The drift use case: learn what each server's branches hold now and compare it with what this tool last applied.

``gitops drift`` and the GitHub Action's ``command: drift`` both call :func:`check_drift`; the decision is
``gitops.core.drift.compare``. Drift is code on the server that equals none of what Git says it should be: the
ledger's last applied record (what this machine last deployed), a pending upload's set, or the repository's code as
the command reads it (the working tree or ``--ref``; with a ``build:``, the build's output, built as plan builds
it). So a branch another machine (CI, a laptop) deployed from the same commit is no drift, whichever ledger ran it,
and the verdict does not depend on whether a plan ran first. Only branches with a record are looked at on the
server: a branch this tool never applied is reported as ``no-record`` without a request. It never prints.
"""

from __future__ import annotations

import dataclasses

from gitops.app.budgetgates import check_download_budget
from gitops.app.deploys import unsettled
from gitops.app.gathering import branch_from_list
from gitops.app.localcode import read_code
from gitops.app.session import Session
from gitops.core.drift import BranchDrift, DriftReport, RepositoryCode, compare, record_from_branch
from gitops.core.driftfinding import Drift
from gitops.core.remote import BranchInfo, RemoteBranch
from gitops.errors import ExitCode, ScopeError, SourceError


def check_drift(session: Session) -> DriftReport:
    """Every branch of the session's manifest (narrowed to ``--server``/``--branch`` by :mod:`gitops.app.targets`)
    with its drift finding.

    Per server the branch list (global limit only) says which branches still exist, and its modules (private
    servers, the stand-in) are what they hold; the downloads still needed (a branch listed without modules, or
    every branch without the list) are checked against what remains of ``GET /api/user/code`` before any is sent
    (:class:`BudgetError`, exit 3, otherwise). The ledger is saved once per server. A pending upload found on the
    server (its answer was lost) becomes the applied record.
    """
    configs = session.loaded.manifest.branches
    found: list[BranchDrift] = []
    repository, warnings = _repository(session)
    for server in session.servers():
        ledger = session.ledger(server)
        names = [c.branch for c in configs if c.server == server]
        recorded = [name for name in names if ledger.applied(name) is not None]
        states = _server_states(session, server, recorded) if recorded else {}
        for name in names:
            applied = ledger.applied(name)
            if applied is None:
                found.append(BranchDrift(server, name, Drift(status="no-record")))
                continue
            pending = ledger.pending(name)
            current = states.get(name)
            drift = compare(current, applied, pending, repository.get((server, name)))
            if drift.pending_landed and pending is not None:
                ledger.record_applied(pending)
            if drift.equals_repository and current is not None and current.exists:
                # The server holds what Git holds: that is the last applied state now, on this machine too.
                ledger.record_applied(record_from_branch(current, how="verified", source=drift.repository))
            found.append(BranchDrift(server, name, drift))
        session.save()
    notes = tuple(unsettled(session))
    return DriftReport(tuple(found), session.options.clock.now(), (*session.warnings(), *warnings), notes)


def drift_exit_code(report: DriftReport) -> int:
    """THE drift check's exit code, for ``gitops drift`` and the Action's ``command: drift``: 12 when a branch's
    last deploy is unverified or failing, else 2 for drift and 0 for none."""
    if report.unsettled:
        return ExitCode.UNVERIFIED
    return ExitCode.CHANGES if report.has_drift else ExitCode.OK


def _repository(session: Session) -> tuple[dict[tuple[str, str], RepositoryCode], list[str]]:
    """The repository's code of each branch, as plan reads it (builds included); empty, with a warning, when it
    cannot be read (drift is then measured against the ledger's records alone)."""
    try:
        local = read_code(session.loaded, session.options.ref, session.options.env)
    except SourceError as exc:
        return {}, [
            f"the repository's code could not be read ({exc.message.splitlines()[0]}); drift was measured against "
            "the last applied records only"
        ]
    source = local.source.describe()
    configs = {(c.server, c.branch): c for c in session.loaded.manifest.branches}
    return {
        (b.server, b.branch): RepositoryCode(
            b.code, source, keeps_server_only=configs[(b.server, b.branch)].remote_only == "keep"
        )
        for b in local.branches
    }, []


def _server_states(session: Session, server: str, names: list[str]) -> dict[str, RemoteBranch]:
    """What the server holds now of each branch in ``names``: the branch list, whose modules (private servers, the
    stand-in) stand for the downloads; a download for each branch the list lists without its modules.

    The downloads are budgeted before they are sent; without the list (a token restricted to the code endpoints)
    every branch is downloaded, and the download says whether it exists.
    """
    reader = session.reader(server)
    listing: list[BranchInfo] | None
    try:
        listing = reader.list_branches()
    except ScopeError:
        listing = None
    listed_at = session.options.clock.now()
    entries = None if listing is None else {b.name: b for b in listing}
    to_download = [n for n in names if entries is None or (n in entries and entries[n].modules is None)]
    check_download_budget(session, server, len(to_download), doing="the drift check", instead="Wait")
    states: dict[str, RemoteBranch] = {}
    for name in names:
        listed = None if entries is None else entries.get(name)
        if entries is not None and listed is None:
            states[name] = dataclasses.replace(
                RemoteBranch.missing(name, listed_at), basis="branch-list", checked_at=listed_at
            )
        elif listed is not None and listed.modules is not None:
            states[name] = branch_from_list(server, listed, listed_at)
        else:
            code = reader.get_code(name)
            now = session.options.clock.now()
            found = RemoteBranch.missing(name, now) if code is None else RemoteBranch.from_code(name, code, now)
            states[name] = dataclasses.replace(found, checked_at=now)
    return states
