"""The gathering: what each server holds, learnt through read-only readers with as few downloads as the refresh
policy allows (:func:`gather_remote`), one thread per ledger (:func:`run_concurrently`), each server's failure kept
to itself when the plan isolates them (:data:`SERVER_ERRORS`).

The use case (:mod:`gitops.app.planning`) calls it between reading the local code and building the plan; how to
learn each branch is decided in the pure core (:func:`gitops.core.remote.how_to_learn`), and whether its downloads
fit by the budget gates (:mod:`gitops.app.budgetgates`). It never prints.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Mapping

from gitops.app.budgetgates import check_download_budget, short_rows
from gitops.app.headstart.sidereads import SideReads
from gitops.app.headstart.start import HeadStart
from gitops.app.options import Refresh
from gitops.app.session import Session
from gitops.config.manifest import deployed_names
from gitops.core.codeset import CodeSet
from gitops.core.endpoints import ACTIVATE
from gitops.core.remote import BranchInfo, Judgement, RemoteBranch, RemoteView, how_to_learn
from gitops.edges.codestore import folder_for, kept
from gitops.edges.threads import start_quiet
from gitops.errors import AuthError, BudgetError, GitopsError, ScopeError, ServiceError

#: The errors that belong to one server: with isolation, planning reports them and goes on with the others. Errors
#: of the local code, the manifest or the usage concern every server and always stop the run.
SERVER_ERRORS: tuple[type[GitopsError], ...] = (ServiceError, AuthError, BudgetError)


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
