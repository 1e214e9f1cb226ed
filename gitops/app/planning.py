"""The plan use case: read the local code, learn what the servers hold (:mod:`gitops.app.gathering`), build the plan,
and check it before anything is written (the token's scope; a saved plan against the manifest). Whether it fits the
token's limits is the budget gates' (:mod:`gitops.app.budgetgates`).

The decisions stay in the pure core (``gitops.core.plan``, ``gitops.core.budget``); this module owns the order of
I/O. It never prints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gitops.app.budgetgates import Needs
from gitops.app.deploys import unsettled
from gitops.app.gathering import SERVER_ERRORS, gather_remote
from gitops.app.headstart.start import HeadStart
from gitops.app.localcode import check_uploads, read_code
from gitops.app.session import Session
from gitops.config.manifest import LoadedManifest, deployed_names
from gitops.core.codeset import CodeSet
from gitops.core.endpoints import ACTIVATE
from gitops.core.remote import RemoteView
from gitops.errors import GitopsError, PlanFileError, ScopeError

if TYPE_CHECKING:  # imported where used: the plan model is needed once the servers have answered (AFTER_THE_SERVERS)
    from gitops.core.driftfinding import Drift
    from gitops.core.local import LocalCode, SourceInfo
    from gitops.core.plan import Plan

#: The HTTP client's module (with httpx).
CLIENT = "gitops.edges.service"
#: The modules that talk to a server, imported by this thread while the local read's child reads (the session
#: imports the first and the last; the head start the client, unless every server's branch list was sent ahead:
#: :meth:`HeadStart.import_client_when_needed`). Two threads may import at once: no module of the package imports,
#: at its top, a module that imports it back (``tests/test_startup_imports.py`` checks).
BEFORE_THE_WORKER = ("gitops.config.credentials", CLIENT, "gitops.edges.ledger")

#: What the rest of a plan and its apply import: the local read's worker
#: (:class:`gitops.app.headstart.localread.LocalRead`) imports them while this thread waits for the servers.
AFTER_THE_SERVERS = ("gitops.core.plan", "gitops.render.plan", "gitops.app.applying")


def make_plan(
    session: Session,
    *,
    isolate: bool = False,
    code: Mapping[tuple[str, str], CodeSet] | None = None,
    source: SourceInfo | None = None,
    headstart: HeadStart | None = None,
) -> Plan:
    """Read the local code, learn the servers' state, and build the plan (:func:`budget_error` says whether it
    fits; planning itself refuses only downloads that would not fit).

    With ``isolate``, a server whose planning fails (:data:`SERVER_ERRORS`) does not stop the others: its branches
    are left out and it is recorded in :attr:`Plan.failed` with its message and exit code; when every server
    failed, the worst error (highest exit code) is raised. Without it, the first such error is raised before
    anything is written. ``headstart`` is the fast start (:class:`HeadStart`); without it, the local code is read
    here first and each server is asked in order: slower, the same plan.
    ``code`` replaces the local code of those (server, branch) pairs (``gitops rollback``: the code of a recorded
    deploy, planned as any other), and ``source`` where it came from (the rollback's deploy and its commit, which
    the ledger then records instead of the checked-out commit).
    """
    failed: dict[str, GitopsError] | None = {} if isolate else None
    if headstart is not None:
        local, views = _read_with_head_start(session, headstart, failed)
    else:
        local = read_code(session.loaded, session.options.ref, session.options.env)
        views = gather_remote(session, session.options.refresh, failed)
    failures = failed or {}
    if failures and len(failures) == len(session.servers()):
        # Nothing left to show: the run fails as it would without isolation, with the worst failure's error.
        raise max(failures.values(), key=lambda exc: exc.exit_code)
    local = _without_failed(_with_code(local, code), failures)
    if source is not None:
        local = dataclasses.replace(local, source=source)
    servers = [server for server in session.servers() if server not in failures]
    result, probes = _plan_servers(session, local, views, servers)
    check_uploads(local, result.branches, replaced=set(code or {}))  # what validate refuses, a plan refuses too
    refused = scope_error(result, session, probes)
    if refused is not None:
        raise refused
    probed = headstart.probed if headstart is not None else {}
    return _with_notes(session, result, servers, _plan_warnings(session, probes, probed), failures)


def _read_with_head_start(
    session: Session, headstart: HeadStart, failed: dict[str, GitopsError] | None
) -> tuple[LocalCode, dict[str, RemoteView]]:
    """The local code and the servers' views, read with the head start: the local code beside the imports, the
    ledgers' reading and the wait for the servers; when both fail, the local error is raised."""
    options = session.options
    reading = headstart.reading
    with reading:
        headstart.connect()  # the handshakes run during the ledgers' reading and imports
        # Every ledger is read before any build runs (at reading.start): a build may write where the ledgers live,
        # and the plan must not rest on what it wrote (the ledger notices a file changed under it, and says so).
        for server in session.servers():
            with contextlib.suppress(*SERVER_ERRORS):
                session.ledger(server)
        if not reading.builds:  # a build runs before any request is sent (and a failed one sends none)
            headstart.send_lists()  # before the HTTP client is imported: its answer travels meanwhile
        headstart.import_client_when_needed()
        # apply --yes will most likely upload what it reads: the child makes the upload bodies too, deflated beside
        # the wait.
        deflate, wanted = headstart.deflate_ahead() if options.unattended_apply else (None, None)
        views = gather_remote(
            session,
            options.refresh,
            failed,
            before_requests=functools.partial(reading.start, deflate, wanted, then_import=AFTER_THE_SERVERS),
            headstart=headstart,
        )
        return reading.result(), views


def _with_code(local: LocalCode, code: Mapping[tuple[str, str], CodeSet] | None) -> LocalCode:
    """``local`` with the code of the (server, branch) pairs ``code`` gives in place of what was read."""
    if not code:
        return local
    return dataclasses.replace(
        local,
        branches=[
            dataclasses.replace(b, code=code[(b.server, b.branch)], files={}) if (b.server, b.branch) in code else b
            for b in local.branches
        ],
    )


def _without_failed(local: LocalCode, failures: Mapping[str, GitopsError]) -> LocalCode:
    if not failures:
        return local
    return dataclasses.replace(local, branches=[b for b in local.branches if b.server not in failures])


def _plan_servers(
    session: Session, local: LocalCode, views: Mapping[str, RemoteView], servers: list[str]
) -> tuple[Plan, dict[str, dict[str, int]]]:
    """The plan of ``servers`` (the budget facts learnt again when a short server's token turns out unlimited),
    with its drift findings; and the compression probes it needs."""
    # Imported by the local read's worker while the servers answer (AFTER_THE_SERVERS).
    from gitops.core.plan import build_plan  # noqa: PLC0415 (boundary: after the servers)

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
    from gitops.core.plan import ServerFailure  # noqa: PLC0415 (boundary: after the servers)

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


def scope_error(plan: Plan, session: Session, extra_needs: Needs | None = None) -> ScopeError | None:
    """A :class:`ScopeError` (exit 7) when a restricted token may not use an endpoint that applying ``plan`` needs
    (its steps, and ``extra_needs``), naming the step and the endpoint; ``None`` when every step is in scope or the
    scope is unknown (a password login, a server without the token query). Asked before anything is written, so
    that apply never stops part-way (a branch uploaded but not activated) for a scope it could have known."""
    for server in plan.servers():
        steps = [(b.label, step) for b in plan.branches if b.server == server for step in b.steps]
        extra = sorted((extra_needs or {}).get(server, {}))
        if not steps and not extra:
            continue
        scope = session.scope(server)
        if scope is None or scope[0]:
            continue
        allowed = scope[1]
        missing = [(label, step.request) for label, step in steps if step.request not in allowed]
        missing += [(f"server '{server}'", endpoint) for endpoint in extra if endpoint not in allowed]
        if missing:
            endpoints = sorted({endpoint for _, endpoint in missing})
            where = "; ".join(f"{label}: {endpoint}" for label, endpoint in missing)
            return ScopeError(
                f"server '{server}': the token may not use {', '.join(endpoints)}, which applying this plan needs "
                f"({where}); nothing was sent",
                hint="Allow those endpoints for the token in the account settings (Auth tokens), or use a token with "
                "full access; then plan again.",
            )
    return None


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
    from gitops.core.drift import (  # noqa: PLC0415 (boundary: after the servers)
        compare,
        equal_to_repository,
        record_from_branch,
        source_commit,
        source_text,
        with_drift,
    )

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


def check_saved_plan(plan: Plan, loaded: LoadedManifest) -> None:
    """A saved plan must have been made from this manifest, unchanged (:class:`PlanFileError` otherwise)."""
    if plan.manifest_digest != loaded.digest:
        raise PlanFileError(
            f"the plan no longer matches the manifest {loaded.path}: it was made from a different version of it",
            hint="Make the plan again with the current manifest: 'gitops plan --out FILE'.",
        )
    configured = {(b.server, name) for b in loaded.manifest.branches for name in deployed_names(b)}
    for branch in plan.branches:
        if (branch.server, branch.branch) not in configured:
            raise PlanFileError(
                f"the plan names {branch.label}, which the manifest {loaded.path} does not have",
                hint="Make the plan again with the current manifest: 'gitops plan --out FILE'.",
            )
