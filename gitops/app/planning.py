"""The plan use case, in the order of its I/O: read the local code, learn what the servers hold
(:mod:`gitops.app.gathering`), then build the plan once they have answered (:mod:`gitops.app.planbuilder`); and the
check of a saved plan against the manifest. Whether requests fit the token's limits and scope is the budget gates'
(:mod:`gitops.app.budgetgates`).

The decisions stay in the pure core (``gitops.core.plan``, ``gitops.core.budget``); this module owns the order of
I/O. It never prints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING

from gitops.app.gathering import SERVER_ERRORS, gather_remote
from gitops.app.headstart.start import HeadStart
from gitops.app.localcode import read_code
from gitops.app.session import Session
from gitops.config.manifest import LoadedManifest, deployed_names
from gitops.core.codeset import CodeSet
from gitops.core.remote import RemoteView
from gitops.errors import GitopsError, PlanFileError

if TYPE_CHECKING:  # imported where used: the plan model is needed once the servers have answered (AFTER_THE_SERVERS)
    from gitops.app.headstart.localread import LocalRead
    from gitops.core.local import LocalCode, SourceInfo
    from gitops.core.plan import Plan

#: The HTTP client's module (with httpx).
CLIENT = "gitops.edges.service.client"
#: The modules that talk to a server, imported by this thread while the local read's child reads (the session
#: imports the first and the last; the head start the client, unless every server's branch list was sent ahead:
#: :meth:`HeadStart.import_client_when_needed`). Two threads may import at once: no module of the package imports,
#: at its top, a module that imports it back (``tests/test_startup_imports.py`` checks).
BEFORE_THE_WORKER = ("gitops.config.credentials", CLIENT, "gitops.edges.ledger")

#: What the rest of a plan and its apply import: the local read's worker
#: (:class:`gitops.app.headstart.localread.LocalRead`) imports them while this thread waits for the servers.
AFTER_THE_SERVERS = (
    "gitops.core.plan",
    "gitops.core.planbuild",
    "gitops.app.planbuilder",
    "gitops.render.plan",
    "gitops.app.applying",
)


def make_plan(
    session: Session,
    *,
    isolate: bool = False,
    code: Mapping[tuple[str, str], CodeSet] | None = None,
    source: SourceInfo | None = None,
    head_start: bool = False,
    reading: LocalRead | None = None,
) -> Plan:
    """Read the local code, learn the servers' state, and build the plan (:func:`budget_error` says whether it
    fits; planning itself refuses only downloads that would not fit).

    With ``isolate``, a server whose planning fails (:data:`SERVER_ERRORS`) does not stop the others: its branches
    are left out and it is recorded in :attr:`Plan.failed` with its message and exit code; when every server
    failed, the worst error (highest exit code) is raised. Without it, the first such error is raised before
    anything is written. ``head_start``: plan with the fast start (:class:`HeadStart`), on ``reading`` (the local
    read a front end began as soon as its manifest was loaded) or on one begun here; without it, the local code is
    read here first and each server is asked in order: slower, the same plan.
    ``code`` replaces the local code of those (server, branch) pairs (``gitops rollback``: the code of a recorded
    deploy, planned as any other), and ``source`` where it came from (the rollback's deploy and its commit, which
    the ledger then records instead of the checked-out commit).
    """
    failed: dict[str, GitopsError] | None = {} if isolate else None
    headstart = HeadStart(session, reading) if head_start else None
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
    probed = headstart.probed if headstart is not None else {}
    # Imported by the local read's worker while the servers answer (AFTER_THE_SERVERS), with the plan model.
    from gitops.app import planbuilder  # noqa: PLC0415 (boundary: after the servers)

    return planbuilder.build(session, local, views, servers, replaced=set(code or {}), probed=probed, failures=failures)


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
