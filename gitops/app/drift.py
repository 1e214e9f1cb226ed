"""The drift use case: learn what each server's branches hold now and compare it with what this tool last applied.

``gitops drift`` and the GitHub Action's ``command: drift`` both call :func:`check_drift`; the decision is
``gitops.core.drift.compare``. It reads no local code (no build): drift is the server against the ledger's last
applied record. Only branches with a record are looked at on the server: a branch this tool never applied is
reported as ``no-record`` without a request. It never prints.
"""

from __future__ import annotations

from gitops.app.planning import check_download_budget
from gitops.app.session import Session
from gitops.core.drift import BranchDrift, Drift, DriftReport, compare
from gitops.core.remote import BranchInfo, RemoteBranch
from gitops.errors import ScopeError


def check_drift(s: Session) -> DriftReport:
    """Every branch of the session's manifest (narrowed to ``--server``/``--branch`` by :mod:`gitops.app.targets`)
    with its drift finding.

    Per server, before any request, the downloads it may need (one per branch with a record) are checked against
    what remains of ``GET /api/user/code`` (:class:`BudgetError`, exit 3, otherwise); then the branch list says
    which branches still exist, and each existing one with a record is downloaded. The ledger is saved once per
    server. A pending upload found on the server (its answer was lost) becomes the applied record.
    """
    configs = s.loaded.manifest.branches
    found: list[BranchDrift] = []
    for server in s.servers():
        ledger = s.ledger(server)
        names = [c.branch for c in configs if c.server == server]
        recorded = [name for name in names if ledger.applied(name) is not None]
        states = _server_states(s, server, recorded) if recorded else {}
        for name in names:
            applied = ledger.applied(name)
            if applied is None:
                found.append(BranchDrift(server, name, Drift(status="no-record")))
                continue
            pending = ledger.pending(name)
            drift = compare(states.get(name), applied, pending)
            if drift.pending_landed and pending is not None:
                ledger.record_applied(pending)
            found.append(BranchDrift(server, name, drift))
        s.save()
    return DriftReport(tuple(found), s.options.clock.now(), tuple(s.warnings()))


def _server_states(s: Session, server: str, names: list[str]) -> dict[str, RemoteBranch]:
    """What the server holds now of each branch in ``names``: the branch list (existence), then one download each.

    (When the branch list carries each branch's modules, as the private server's does, the list can stand for the
    downloads; that reading belongs to the client's ``list_branches``.)
    """
    check_download_budget(s, server, len(names), doing="the drift check", instead="Wait")
    reader = s.reader(server)
    listing: list[BranchInfo] | None
    try:
        listing = reader.list_branches()
    except ScopeError:  # a token restricted to the code endpoints: the download says whether the branch exists
        listing = None
    listed = None if listing is None else {b.name for b in listing}
    states: dict[str, RemoteBranch] = {}
    for name in names:
        now = s.options.clock.now()
        if listed is not None and name not in listed:
            states[name] = RemoteBranch.missing(name, now)
            continue
        code = reader.get_code(name)
        states[name] = RemoteBranch.missing(name, now) if code is None else RemoteBranch.from_code(name, code, now)
    return states
