"""The plan built from what was gathered, once the servers have answered: the pure core's plan
(:func:`gitops.core.plan.build_plan`) with each branch's drift finding (the ledger's applied records kept up to
date), the compression probes it needs, the refusals it must make before anything is written (what validate refuses;
a token's scope), and its notes (unsettled deploys, warnings, failed servers).

Imported by the use case (:func:`gitops.app.planning.make_plan`) after the gathering, and by the local read's worker
while the servers answer (:data:`gitops.app.planning.AFTER_THE_SERVERS`): the plan model is never on the way to the
first request. It never prints.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gitops.app.budgetgates import scope_error
from gitops.app.deploys import unsettled
from gitops.app.localcode import check_uploads
from gitops.app.session import Session
from gitops.core.drift import (
    compare,
    equal_to_repository,
    record_from_branch,
    source_commit,
    source_text,
    with_drift,
)
from gitops.core.endpoints import ACTIVATE
from gitops.core.plan import Plan, ServerFailure
from gitops.core.planbuild import build_plan
from gitops.core.remote import RemoteView
from gitops.errors import GitopsError

if TYPE_CHECKING:
    from gitops.core.driftfinding import Drift
    from gitops.core.local import LocalCode


def build(
    session: Session,
    local: LocalCode,
    views: Mapping[str, RemoteView],
    servers: list[str],
    *,
    replaced: set[tuple[str, str]],
    probed: Mapping[str, bool | None],
    failures: Mapping[str, GitopsError],
) -> Plan:
    """The plan of ``servers`` from the local code and the servers' views, refused when it uploads what validate
    refuses (``replaced``: the (server, branch) pairs whose code a rollback gives) or needs what the token may not
    use; with its notes (``probed``: the compression probes sent ahead; ``failures``: the servers left out)."""
    result, probes = _plan_servers(session, local, views, servers)
    check_uploads(local, result.branches, replaced=replaced)  # what validate refuses, a plan refuses too
    refused = scope_error(result, session, probes)
    if refused is not None:
        raise refused
    return _with_notes(session, result, servers, _plan_warnings(session, probes, probed), failures)


def _plan_servers(
    session: Session, local: LocalCode, views: Mapping[str, RemoteView], servers: list[str]
) -> tuple[Plan, dict[str, dict[str, int]]]:
    """The plan of ``servers`` (the budget facts learnt again when a short server's token turns out unlimited),
    with its drift findings; and the compression probes it needs."""
    options = session.options
    now = options.clock.now()
    budgets = {server: session.budget_facts(server) for server in servers}
    # The same inputs each time; only the budget facts (after the token was asked) and the probe's needs change.
    plan_with = functools.partial(
        build_plan,
        loaded=session.loaded,
        local=local,
        remote=views,
        refresh=options.refresh,
        now=now,
        verify=options.verify,
    )
    result = plan_with(budgets=budgets)
    probes = probe_needs(result, session)
    if probes:
        result = plan_with(budgets=budgets, extra_needs=probes)
    short = {row.server for row in result.budget if not row.fits}
    # Every short server is asked (no short-circuit): each one's ledger learns its own unlimited state.
    learnt = [session.learn_unlimited(server) for server in sorted(short)]
    if any(learnt):
        budgets = {server: session.budget_facts(server) for server in servers}
        result = plan_with(budgets=budgets, extra_needs=probes)
    return mark_drift(session, result, views), probes


def _plan_warnings(
    session: Session, probes: Mapping[str, Mapping[str, int]], probed: Mapping[str, bool | None]
) -> list[str]:
    """What the plan says beside its steps: the compression probes due or sent ahead, and the ledgers' warnings."""
    extra = [
        f"server '{server}': apply first asks, with one POST /api/user/set-active-branch of a branch that does not "
        "exist (nothing changes), whether the server reads compressed uploads; the answer is kept in the ledger "
        "(compress: auto; 'always' or 'never' in the manifest skips it)"
        for server in sorted(probes)
    ]
    answers = {True: "it does", False: "it does not", None: "no answer, asked again next time"}
    extra += [
        f"server '{server}': asked, with one POST /api/user/set-active-branch of a branch that does not exist "
        f"(nothing changes), whether the server reads compressed uploads: {answers[learnt]}; kept in the ledger "
        "(compress: auto)"
        for server, learnt in sorted(probed.items())
    ]
    return extra + session.warnings()


def _with_notes(
    session: Session, result: Plan, servers: list[str], extra: list[str], failures: Mapping[str, GitopsError]
) -> Plan:
    """``result`` with the unsettled deploys' notes, the warnings ``extra`` and the failed servers."""
    update: dict[str, Any] = {}  # fields of the Plan (dataclasses.replace)
    notes = unsettled(session, servers)
    if notes:
        update["unsettled"] = notes
    if extra:
        update["warnings"] = [*result.warnings, *extra]
    if failures:
        update["failed"] = [
            ServerFailure(
                server=server,
                branches=[b.branch for b in session.loaded.manifest.branches if b.server == server],
                message=str(exc),
                exit_code=exc.exit_code,
            )
            for server, exc in sorted(failures.items())
        ]
    return dataclasses.replace(result, **update) if update else result


def probe_needs(plan: Plan, session: Session) -> dict[str, dict[str, int]]:
    """The compression probe's request (:meth:`Session.compression`) per server whose code the plan writes and
    where the probe is due: one ``POST /api/user/set-active-branch``, budgeted like the plan's own requests."""
    writing = sorted({b.server for b in plan.branches if b.writes_code})
    return {server: {ACTIVATE: 1} for server in writing if session.compression(server) == "probe"}


def mark_drift(session: Session, plan: Plan, views: Mapping[str, RemoteView]) -> Plan:
    """Attach each branch's drift finding (``gitops.core.drift``) to the plan, and keep the last applied records.

    A branch the plan verified on the server now to hold exactly the repository's code is recorded as applied
    (``verified``) first: what the server holds is then what Git holds, so nothing was lost outside Git. A pending
    upload found on the server (its answer was lost) becomes the applied record. Saved as one step.
    """
    drifts: dict[tuple[str, str], Drift] = {}
    for branch in plan.branches:
        ledger = session.ledger(branch.server)
        view = views.get(branch.server)
        seen = view.branches.get(branch.branch) if view is not None else None
        if seen is not None and seen.exists and equal_to_repository(branch):
            ledger.record_applied(
                record_from_branch(
                    seen, how="verified", commit=source_commit(plan.source), source=source_text(plan.source)
                )
            )
        pending = ledger.pending(branch.branch)
        drift = compare(seen, ledger.applied(branch.branch), pending)
        if drift.pending_landed and pending is not None:
            ledger.record_applied(pending)
        drifts[(branch.server, branch.branch)] = drift
    session.save()
    return with_drift(plan, drifts)
