"""The plan use case: read the local code, learn what the servers hold through read-only readers, build the plan,
and the budget gates (the one place that decides whether requests fit what remains of the token's limits).

The decisions stay in the pure core (``gitops.core.plan``, ``gitops.core.budget``); this module owns the order of
I/O. It never prints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gitops.app.deploys import unsettled
from gitops.app.headstart.sidereads import SideReads
from gitops.app.headstart.start import HeadStart
from gitops.app.localcode import check_uploads, read_code
from gitops.app.options import Refresh
from gitops.app.session import Session
from gitops.config.manifest import LoadedManifest, deployed_names
from gitops.core.budget import EndpointBudget, assess, shortfall_message
from gitops.core.codeset import CodeSet
from gitops.core.endpoints import ACTIVATE, DOWNLOAD
from gitops.core.remote import BranchInfo, Judgement, RemoteBranch, RemoteView, how_to_learn
from gitops.edges.codestore import folder_for, kept
from gitops.edges.threads import start_quiet
from gitops.errors import AuthError, BudgetError, GitopsError, PlanFileError, ScopeError, ServiceError

if TYPE_CHECKING:  # imported where used: the plan model is needed once the servers have answered (AFTER_THE_SERVERS)
    from gitops.core.driftfinding import Drift
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
AFTER_THE_SERVERS = ("gitops.core.plan", "gitops.render.plan", "gitops.app.applying")

#: Extra requests per server and endpoint, beyond what a plan's steps spend (e.g. the downloads of a check).
Needs = Mapping[str, Mapping[str, int]]


#: The errors that belong to one server: with isolation, planning reports them and goes on with the others. Errors
#: of the local code, the manifest or the usage concern every server and always stop the run.
SERVER_ERRORS: tuple[type[GitopsError], ...] = (ServiceError, AuthError, BudgetError)


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


def _from_ledger(branch: RemoteBranch | None) -> RemoteBranch | None:
    """A branch state read from the ledger: learnt by a download back then, so its provenance is now the ledger
    (its own uploads keep theirs, which says more)."""
    if branch is not None and branch.how == "download":
        return dataclasses.replace(branch, how="ledger")
    return branch


def _with_kept_text(session: Session, server: str, branch: RemoteBranch) -> RemoteBranch:
    """``branch`` with its modules' text when it is known by digest only (from the ledger, or this tool's own
    upload) and the code of that digest is kept beside the ledger (:func:`gitops.edges.codestore.kept`, which
    checks the kept set's digest as it reads it): a branch with ``ignore_lines`` can then tell a time stamp from a
    change without a download. Unchanged otherwise."""
    modules = branch.modules
    if modules is None or branch.digest is None or all(f.text is not None or f.is_binary for f in modules.values()):
        return branch
    held = kept(folder_for(session.ledger(server).path), branch.digest)
    if held is None:
        return branch
    seen = RemoteBranch.from_code(branch.name, CodeSet.from_wire(held), branch.learnt_at, branch.how)
    if seen.digest != branch.digest:
        return branch
    return dataclasses.replace(branch, modules=seen.modules)


def gather_remote(
    session: Session,
    refresh: Refresh,
    failed: dict[str, GitopsError] | None = None,
    *,
    before_requests: Callable[[], None] | None = None,
    headstart: HeadStart | None = None,
) -> dict[str, RemoteView]:
    """Learn what each server holds, spending as few downloads as the refresh policy allows, and say for each
    branch whether this run verified it.

    With ``refresh`` ``auto`` or ``always`` each server's branch list is asked first (one request, counted only
    against the global limit): when it carries a branch's modules (private servers, the stand-in) those are the
    download; when it carries a modification time, a ledger record learnt at that same time is confirmed by it.
    Only what the list cannot confirm is downloaded (``auto``; ``always`` downloads every branch), and those
    downloads are checked against what is known to remain of ``GET /api/user/code`` (60 per hour) before any is
    sent: :class:`BudgetError` if they would not fit. Each server's reads are one step: the ledger is saved after.

    With ``failed`` (a dict to fill), a server whose list, budget check or reads raise one of
    :data:`SERVER_ERRORS` is recorded there and left out of the views, and the other servers are still read.

    ``before_requests`` is called just before the first request is sent (``make_plan`` starts reading the local
    code then). With ``headstart``, lists sent ahead are read first and a first contact's reads go ahead.
    """
    return _Gathering(session, refresh, failed, headstart).run(before_requests or (lambda: None))


class _Gathering:
    """One :func:`gather_remote`: its phases per server (open, list, probe early, judge, learn), each isolated."""

    def __init__(
        self,
        session: Session,
        refresh: Refresh,
        failed: dict[str, GitopsError] | None,
        headstart: HeadStart | None,
    ) -> None:
        self.session = session
        self.refresh = refresh
        self.failed = failed
        self.headstart = headstart
        self.trust = float(session.loaded.manifest.budget.trust_own_upload_seconds)
        self.configs = session.loaded.manifest.branches
        self.listings: dict[str, list[BranchInfo] | None] = {}
        self.listed_at: dict[str, float] = {}
        self.judged: dict[str, dict[str, Judgement]] = {}
        self.errors: dict[str, GitopsError] = {}
        self.views: dict[str, RemoteView] = {}
        self.side_reads: dict[str, SideReads] = {}
        # The branches whose comparison ignores lines (ignore_lines): known by digest only, their text is taken
        # from the code kept beside the ledger, when it is kept (_with_kept_text).
        self.stamped = {(c.server, name) for c in self.configs if c.ignore_lines for name in deployed_names(c)}

    def run(self, started: Callable[[], None]) -> dict[str, RemoteView]:
        # Each server's credentials, ledger (whose lock is taken here, in the servers' order) and client are opened
        # in this thread; then the servers are asked at the same time, one thread per ledger (two server names of
        # one account share a ledger, and so a thread): a player with three servers waits for the slowest.
        session = self.session
        for server in session.servers():
            self.isolated(server, functools.partial(self.open_server, server))
        groups: dict[int, list[str]] = {}
        for server in session.servers():
            if server not in self.errors:
                groups.setdefault(id(session.ledger(server)), []).append(server)
        started()
        try:
            for server in session.servers():
                self.isolated(server, functools.partial(self.send_ahead, server))
            run_concurrently([functools.partial(self.one_ledger, group) for group in groups.values()])
        finally:
            self.finish_ahead(list(self.side_reads))  # a job that never ran (interrupted): closed all the same
        for server in session.servers():  # in the servers' order, whichever finished first
            if server in self.errors:
                if self.failed is None:
                    raise self.errors[server]
                self.failed[server] = self.errors[server]
        return self.views

    def isolated(self, server: str, step: Callable[[], None]) -> None:
        if server in self.errors or (self.failed is not None and server in self.failed):
            return
        try:
            step()
        except SERVER_ERRORS as exc:
            self.errors[server] = exc
            self.session.save(server)  # what the failed server's reads taught (a 429's headers, say) is kept

    def open_server(self, server: str) -> None:
        self.session.ledger(server)
        # Planned from the ledger alone (refresh=never): no client, and no credentials needed. A list sent ahead is
        # read first (list_server), and the client is made only if something more is asked.
        lists_ahead = self.headstart is not None and self.headstart.lists_ahead(server)
        if self.refresh != "never" and not lists_ahead:
            self.session.reader(server)

    def send_ahead(self, server: str) -> None:
        if self.headstart is None:
            return
        sent = self.headstart.send_side_reads(server, functools.partial(check_download_budget, self.session))
        if sent is not None:
            self.side_reads[server] = sent

    def one_ledger(self, servers: list[str]) -> None:
        try:
            for step in (self.list_server, self.probe_early, self.judge_server, self.learn):
                for server in servers:
                    self.isolated(server, functools.partial(step, server))
        finally:
            self.finish_ahead(servers)

    def finish_ahead(self, servers: list[str]) -> None:
        # In the thread of the servers' ledger: what the reads sent ahead taught reaches it here.
        # Also for a server that failed: its side clients are closed, and what their requests taught is kept.
        for server in servers:
            sent = self.side_reads.get(server)
            if sent is not None:
                sent.finish()

    def list_server(self, server: str) -> None:
        if self.refresh == "never":
            return
        session = self.session
        try:
            # Read on the early connection, or None: the client reads it.
            listed = self.headstart.listed_ahead(server) if self.headstart is not None else None
            self.listings[server] = listed if listed is not None else session.reader(server).list_branches()
        except ScopeError:
            # A token restricted to the code endpoints: existence comes from the download, activation is unknown
            # (and so re-sent by apply).
            self.listings[server] = None
        self.listed_at[server] = session.options.clock.now()

    def probe_early(self, server: str) -> None:
        session = self.session
        if self.headstart is None or not session.options.unattended_apply or server not in self.listings:
            return  # listed now: the probe's branch does not exist
        if session.compression(server) != "probe" or short_rows(session, server, {ACTIVATE: 1}):
            return
        sent = self.side_reads.get(server)
        if sent is None:
            sent = self.side_reads[server] = self.headstart.side_reads(server)  # only this server's thread
        sent.send_probe()

    def judge_server(self, server: str) -> None:
        session = self.session
        ledger = session.ledger(server)
        listing = self.listings.get(server)
        entries = {b.name: b for b in listing or ()}
        self.judged[server] = {
            name: how_to_learn(
                ledger.remembered_branch(name),
                entries.get(name),
                listing_known=listing is not None,
                refresh=self.refresh,
                needs_content=c.remote_only == "keep",
                trust_seconds=self.trust,
                now=session.options.clock.now(),
            )
            for c in self.configs
            if c.server == server
            # A blue/green branch's standby is learnt too: the plan deploys to whichever of the two is not active.
            for name in sorted(deployed_names(c))
        }
        check_download_budget(session, server, sum(1 for j in self.judged[server].values() if j == "download"))

    def learn(self, server: str) -> None:
        self.views[server] = learn_server(
            self.session,
            server,
            self.listings.get(server),
            self.listed_at.get(server),
            self.judged[server],
            self.refresh,
            self.side_reads.get(server),
            frozenset(name for where, name in self.stamped if where == server),
        )


def run_concurrently(jobs: list[Callable[[], None]]) -> None:
    """Run ``jobs`` at the same time, each in a thread of its own (one job: in this thread), and wait for all.

    The threads leave Ctrl-C to this one (:func:`gitops.edges.threads.start_quiet`), which waits interruptibly; a
    job's unexpected exception is raised here once every job has ended (the first in ``jobs``' order)."""
    if len(jobs) <= 1:
        for job in jobs:
            job()
        return
    raised: list[tuple[int, BaseException]] = []

    def run(index: int, job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # handed to the waiting thread
            raised.append((index, exc))

    threads = [
        threading.Thread(target=run, args=(i, job), name=f"gitops-server-{i}", daemon=True)
        for i, job in enumerate(jobs)
    ]
    for thread in threads:
        start_quiet(thread)
    for thread in threads:
        while thread.is_alive():
            thread.join(0.5)
    if raised:
        raise min(raised, key=lambda pair: pair[0])[1]


def learn_server(
    session: Session,
    server: str,
    listing: list[BranchInfo] | None,
    listed_at: float | None,
    judged: Mapping[str, Judgement],
    refresh: Refresh,
    sent_ahead: SideReads | None = None,
    stamped: frozenset[str] = frozenset(),
) -> RemoteView:
    ledger = session.ledger(server)
    entries = {b.name: b for b in listing or ()}
    branches: dict[str, RemoteBranch | None] = {}
    for name, judgement in judged.items():
        listed = entries.get(name)
        remembered = ledger.remembered_branch(name)
        branch: RemoteBranch | None = None
        if judgement == "list" and listed is not None and listed_at is not None:
            branch = branch_from_list(server, listed, listed_at)
            ledger.remember_branch(branch)
        elif judgement == "missing" and listed_at is not None:
            branch = dataclasses.replace(
                RemoteBranch.missing(name, listed_at), basis="branch-list", checked_at=listed_at
            )
            ledger.remember_branch(branch)
        elif judgement == "confirmed" and remembered is not None:
            branch = dataclasses.replace(
                _from_ledger(remembered) or remembered, basis="branch-list", checked_at=listed_at
            )
        elif judgement == "unverified":
            branch = _from_ledger(remembered)
        elif judgement == "download":
            answered = sent_ahead.download(name) if sent_ahead is not None else None
            if answered is not None:
                code, at = answered
            else:
                code = session.reader(server).get_code(name)
                at = session.options.clock.now()
            stamp = listed.stamp if listed is not None else None
            branch = RemoteBranch.missing(name, at) if code is None else RemoteBranch.from_code(name, code, at)
            branch = dataclasses.replace(branch, stamp=stamp, checked_at=at)
            # The stamp listed before the download: if the branch changed in between, the next plan sees a newer
            # stamp and downloads again (never the other way round).
            ledger.stamp_branch(name, stamp)
        if branch is not None and name in stamped:
            branch = _with_kept_text(session, server, branch)
        branches[name] = branch
    session.save(server)
    if refresh == "never" or listing is None:
        # Without the branch list, which branches are active is what this tool last set (from the ledger).
        remembered_list = ledger.remembered_branch_list()
        return RemoteView(
            server,
            tuple(remembered_list[0]) if remembered_list else None,
            branches,
            listed_at if listed_at is not None else (remembered_list[1] if remembered_list else None),
        )
    return RemoteView(server, tuple(listing), branches, listed_at)


def branch_from_list(server: str, listed: BranchInfo, at: float) -> RemoteBranch:
    """The branch as the list carries it: its modules are the download (:class:`ServiceError` when they are not
    modules, as a download of them would be)."""
    try:
        code = CodeSet.from_wire(dict(listed.modules or {}))
    except ValueError as exc:
        raise ServiceError(
            f"server '{server}' answered GET /api/user/branches with JSON the tool cannot read: branch "
            f"{listed.name!r}: {exc}.",
            hint="Check that the url in the manifest is a Screeps server's base address.",
        ) from None
    branch = RemoteBranch.from_code(listed.name, code, at, "download", listed.stamp)
    return dataclasses.replace(branch, basis="branch-list", checked_at=at)


# --- the budget gates: the one place that decides what fits ----------------------------------------------------


def check_download_budget(
    session: Session,
    server: str,
    needed: int,
    *,
    doing: str = "planning",
    instead: str = "Plan from the ledger with --refresh=never (no download), wait",
) -> None:
    """Refuse, before any download, downloads that would not fit what remains of ``GET /api/user/code`` (the
    branch list, counted only against the global limit, may have been asked first).

    ``doing`` names who needs them in the message (``planning``, ``the pull``); ``instead`` starts the hint with
    what else the person can do.
    """
    if not needed:
        return
    rows = short_rows(session, server, {DOWNLOAD: needed})
    if rows and session.learn_unlimited(server):
        rows = short_rows(session, server, {DOWNLOAD: needed})
    if rows:
        raise BudgetError(
            f"{doing} needs more downloads than remain; no download was sent:\n"
            + "\n".join(f"  - {shortfall_message(r)}" for r in rows),
            hint=f"{instead} for the reset, or lift the limits for two hours: 'gitops unlock --server {server}' "
            "prints the no-rate-limit link.",
        )


def budget_error(plan: Plan, session: Session) -> BudgetError | None:
    """A :class:`BudgetError` naming each limit the plan exceeds (as it was planned), or ``None`` when it fits."""
    rows = [r for r in plan.budget if not r.fits]
    if not rows:
        return None
    return _budget_refusal(rows, session)


def recheck_budget(plan: Plan, session: Session, extra_needs: Needs | None = None) -> None:
    """Check the plan's requests (plus ``extra_needs`` per server) against the ledger as it is now; raise the
    :class:`BudgetError` (with the unlock links) when they do not fit."""
    failing = _failing_rows(plan, session, extra_needs)
    learnt = [session.learn_unlimited(server) for server in sorted({r.server for r in failing})]
    if any(learnt):
        failing = _failing_rows(plan, session, extra_needs)
    if failing:
        raise _budget_refusal(failing, session)


def _budget_refusal(rows: list[EndpointBudget], session: Session) -> BudgetError:
    lines = [shortfall_message(r) for r in rows]
    error = BudgetError(
        "the plan does not fit the token's rate limits; nothing was sent:\n" + "\n".join(f"  - {x}" for x in lines),
        hint="Wait for the reset, raise or remove budget.reserve in the manifest, or lift the limits for two hours "
        "with the no-rate-limit page (open it and press Proceed).",
    )
    for server in sorted({r.server for r in rows}):
        link = session.unlock_link(server)
        if link is not None:
            error.unlock_links[server] = link
    return error


def _failing_rows(plan: Plan, session: Session, extra_needs: Needs | None) -> list[EndpointBudget]:
    from gitops.core.plan import requests_needed  # noqa: PLC0415 (boundary: after the servers)

    failing: list[EndpointBudget] = []
    for server in plan.servers():
        needs = requests_needed([b for b in plan.branches if b.server == server])
        for endpoint, count in (extra_needs or {}).get(server, {}).items():
            needs[endpoint] = needs.get(endpoint, 0) + count
        failing.extend(short_rows(session, server, needs))
    return failing


def short_rows(session: Session, server: str, needs: Mapping[str, int]) -> list[EndpointBudget]:
    """The budget rows of ``needs`` that do not fit what the ledger knows remains (none for a password login)."""
    facts = session.budget_facts(server)
    if not facts.limited:
        return []
    rows = assess(
        server,
        needs,
        facts.windows,
        reserve=facts.reserve or {},
        unlimited_until=facts.unlimited_until,
        now=session.options.clock.now(),
    )
    return [r for r in rows if not r.fits]


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
