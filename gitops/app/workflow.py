"""The edges put together: load the manifest, read the code, learn what the servers hold, plan, check the budget.

This module owns the order of I/O for ``plan`` and ``apply``; the decisions stay in the pure core
(``gitops.core.plan``, ``gitops.core.budget``, ``gitops.core.diff``). The CLI and the GitHub Action call it; it
never prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gitops.app.localcode import read_code
from gitops.config.manifest import BranchConfig, LoadedManifest, load_manifest
from gitops.core.budget import BudgetFacts, EndpointBudget, assess, shortfall_message
from gitops.core.plan import DOWNLOAD, Plan, build_plan, requests_needed
from gitops.core.remote import BranchInfo, RemoteBranch, RemoteView
from gitops.edges.clock import Clock, SystemClock
from gitops.edges.sources import LocalCode
from gitops.errors import BudgetError, GitopsError, PlanFileError, ScopeError
from gitops.secrets import Secret

if TYPE_CHECKING:  # imported lazily at run time: only commands that talk to a server need them
    from gitops.config.credentials import Auth
    from gitops.edges.client import ServiceClient
    from gitops.edges.ledger import Ledger

Refresh = Literal["always", "auto", "never"]
REFRESH_CHOICES: tuple[Refresh, ...] = ("always", "auto", "never")


@dataclass
class Options:
    """Everything a run needs from outside: flags, environment, clock, and (for tests) the HTTP transport."""

    manifest: Path
    env: Mapping[str, str]
    ref: str | None = None
    refresh: Refresh = "auto"
    max_wait: float = 60.0
    state_dir: Path | None = None
    clock: Clock = field(default_factory=SystemClock)
    transport: Any = None
    on_wait: Callable[[float, str], None] | None = None
    log: Callable[[str], None] | None = None


class Session:
    """Clients and ledgers of the servers one run talks to; opened lazily, closed together."""

    def __init__(self, loaded: LoadedManifest, options: Options) -> None:
        from gitops.edges.ledger import default_state_dir

        self.loaded = loaded
        self.options = options
        self.state_dir = options.state_dir or default_state_dir(options.env)
        self._clients: dict[str, ServiceClient] = {}
        self._ledgers: dict[str, Ledger] = {}
        self._auth: dict[str, Auth] = {}
        self._queried: set[str] = set()

    def auth(self, server: str) -> Auth:
        """The server's credentials; :class:`AuthError` naming what is missing."""
        from gitops.config.credentials import resolve_auth

        if server not in self._auth:
            config = self.loaded.manifest.servers[server]
            self._auth[server] = resolve_auth(server, config, self.options.env, cwd=self.loaded.base_dir)
        return self._auth[server]

    def ledger(self, server: str) -> Ledger:
        """The server's ledger: keyed by the token's fingerprint, or the last one used when there is no token."""
        from gitops.config.credentials import auth_available
        from gitops.edges.ledger import Ledger

        if server not in self._ledgers:
            config = self.loaded.manifest.servers[server]
            fingerprint = None
            if auth_available(config, self.options.env, cwd=self.loaded.base_dir):
                fingerprint = self.auth(server).fingerprint()
            self._ledgers[server] = Ledger.open(self.state_dir, config.url, fingerprint, clock=self.options.clock)
        return self._ledgers[server]

    def client(self, server: str) -> ServiceClient:
        """A :class:`gitops.edges.client.ServiceClient` for the server (credentials required)."""
        from gitops.edges.client import ServiceClient

        if server not in self._clients:
            config = self.loaded.manifest.servers[server]
            self._clients[server] = ServiceClient(
                server_name=server,
                url=config.url,
                auth=self.auth(server),
                ledger=self.ledger(server),
                clock=self.options.clock,
                transport=self.options.transport,
                max_wait=self.options.max_wait,
                on_wait=self.options.on_wait,
                log=self.options.log,
            )
        return self._clients[server]

    def learn_unlimited(self, server: str) -> bool:
        """Ask the server (once per run) whether the token is unlimited now: the person may have pressed Proceed on
        the no-rate-limit page since the ledger last looked. The token query is not rate limited; it is skipped
        with --refresh=never (no request at all) and for password logins (private servers have no limits)."""
        from gitops.config.credentials import TokenAuth, auth_available
        from gitops.errors import GitopsError

        if self.options.refresh == "never" or server in self._queried:
            return self._unlimited_now(server)
        self._queried.add(server)
        config = self.loaded.manifest.servers[server]
        if not auth_available(config, self.options.env, cwd=self.loaded.base_dir):
            return False
        if not isinstance(self.auth(server), TokenAuth):
            return False
        try:
            self.client(server).query_token()
        except GitopsError as exc:  # an old server without the token query: the ledger's view stands
            if self.options.log is not None:
                self.options.log(f"token query on server '{server}' failed: {exc.message}")
        return self._unlimited_now(server)

    def _unlimited_now(self, server: str) -> bool:
        until = self.ledger(server).unlimited_until
        return until is not None and until > self.options.clock.now()

    def budget_facts(self, server: str) -> BudgetFacts:
        from gitops.config.credentials import PasswordAuth, auth_available

        ledger = self.ledger(server)
        config = self.loaded.manifest.servers[server]
        # Only token-authenticated requests are rate limited: a password login spends no budget.
        limited = not (
            auth_available(config, self.options.env, cwd=self.loaded.base_dir)
            and isinstance(self.auth(server), PasswordAuth)
        )
        return BudgetFacts(ledger.windows(), ledger.unlimited_until, self.loaded.manifest.budget.reserve, limited)

    def unlock_link(self, server: str) -> Secret | None:
        try:
            return self.client(server).no_rate_limit_url()
        except GitopsError:  # no credentials, or a password login: there is no link to give
            return None

    def warnings(self) -> list[str]:
        return [w for ledger in self._ledgers.values() for w in ledger.warnings]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


@contextmanager
def session(options: Options, loaded: LoadedManifest | None = None) -> Iterator[Session]:
    s = Session(loaded or load_manifest(options.manifest), options)
    try:
        yield s
    finally:
        s.close()


def servers_of(loaded: LoadedManifest) -> list[str]:
    return sorted({b.server for b in loaded.manifest.branches})


def _needs_download(
    config: BranchConfig, remembered: RemoteBranch | None, refresh: Refresh, trust: float, now: float
) -> bool:
    """Whether planning must download this branch (``auto``: unless this tool uploaded it recently)."""
    if refresh == "always":
        return True
    if refresh == "never":
        return False
    if remembered is None or remembered.how != "own-upload" or remembered.modules is None:
        return True
    if config.remote_only == "keep":  # kept modules must be re-sent: their content is needed
        return True
    return now - remembered.learnt_at > trust


def _from_ledger(branch: RemoteBranch | None) -> RemoteBranch | None:
    """A branch state read from the ledger: learnt by a download back then, so its provenance is now the ledger
    (its own uploads keep theirs, which says more)."""
    if branch is not None and branch.how == "download":
        return dataclasses.replace(branch, how="ledger")
    return branch


def gather_remote(s: Session, refresh: Refresh) -> dict[str, RemoteView]:
    """Learn what each server holds, spending as few downloads as the refresh policy allows.

    Before any request, the downloads it needs are checked against what is known to remain of
    ``GET /api/user/code`` (60 per hour); :class:`BudgetError` if they would not fit.
    """
    now = s.options.clock.now()
    trust = float(s.loaded.manifest.budget.trust_own_upload_seconds)
    views: dict[str, RemoteView] = {}
    configs = s.loaded.manifest.branches
    wanted: dict[str, list[BranchConfig]] = {}
    for server in servers_of(s.loaded):
        ledger = s.ledger(server)
        to_download = [
            c
            for c in configs
            if c.server == server and _needs_download(c, ledger.remembered_branch(c.branch), refresh, trust, now)
        ]
        wanted[server] = to_download
        _check_download_budget(s, server, len(to_download), now)
    for server in servers_of(s.loaded):
        ledger = s.ledger(server)
        branches: dict[str, RemoteBranch | None] = {}
        if refresh == "never":
            remembered = ledger.remembered_branch_list()
            for c in configs:
                if c.server == server:
                    branches[c.branch] = _from_ledger(ledger.remembered_branch(c.branch))
            views[server] = RemoteView(
                server,
                tuple(remembered[0]) if remembered else None,
                branches,
                remembered[1] if remembered else None,
            )
            continue
        client = s.client(server)
        listing: list[BranchInfo] | None
        try:
            listing = client.list_branches()
        except ScopeError:
            # A token restricted to the code endpoints: existence comes from the download, activation is unknown
            # (and so re-sent by apply).
            listing = None
        learnt_at = s.options.clock.now()
        download = {c.branch for c in wanted[server]}
        for c in configs:
            if c.server != server:
                continue
            if listing is not None and c.branch not in {b.name for b in listing}:
                branches[c.branch] = RemoteBranch.missing(c.branch, learnt_at)
            elif c.branch in download:
                code = client.get_code(c.branch)
                at = s.options.clock.now()
                branches[c.branch] = (
                    RemoteBranch.missing(c.branch, at) if code is None else RemoteBranch.from_code(c.branch, code, at)
                )
            else:
                branches[c.branch] = _from_ledger(ledger.remembered_branch(c.branch))
        if listing is None:
            # Without the branch list, which branches are active is what this tool last set (from the ledger).
            remembered = ledger.remembered_branch_list()
            views[server] = RemoteView(server, tuple(remembered[0]) if remembered else None, branches, learnt_at)
        else:
            views[server] = RemoteView(server, tuple(listing), branches, learnt_at)
    return views


def _check_download_budget(s: Session, server: str, needed: int, now: float) -> None:
    """Refuse, before any request, a plan whose downloads would not fit what remains of ``GET /api/user/code``."""
    if not needed:
        return
    rows = _short_rows(s, server, {DOWNLOAD: needed}, now)
    if rows and s.learn_unlimited(server):
        rows = _short_rows(s, server, {DOWNLOAD: needed}, now)
    if rows:
        raise BudgetError(
            "planning needs more downloads than remain; nothing was sent:\n"
            + "\n".join(f"  - {shortfall_message(r)}" for r in rows),
            hint="Plan from the ledger with --refresh=never (no download), wait for the reset, or lift the limits "
            f"for two hours: 'gitops unlock --server {server}' prints the no-rate-limit link.",
        )


def plan(options: Options, s: Session) -> tuple[Plan, LocalCode]:
    """Read the local code, learn the servers' state, and build the plan (its budget checked by the caller)."""
    local = read_code(s.loaded, options.ref)
    views = gather_remote(s, options.refresh)
    now = options.clock.now()
    budgets = {server: s.budget_facts(server) for server in servers_of(s.loaded)}
    result = build_plan(loaded=s.loaded, local=local, remote=views, budgets=budgets, refresh=options.refresh, now=now)
    short = {row.server for row in result.budget if not row.fits}
    # Every short server is asked (no short-circuit): each one's ledger learns its own unlimited state.
    learnt = [s.learn_unlimited(server) for server in sorted(short)]
    if any(learnt):
        budgets = {server: s.budget_facts(server) for server in servers_of(s.loaded)}
        result = build_plan(
            loaded=s.loaded, local=local, remote=views, budgets=budgets, refresh=options.refresh, now=now
        )
    extra = s.warnings()
    if extra:
        result = result.model_copy(update={"warnings": [*result.warnings, *extra]})
    return result, local


def budget_error(plan_: Plan, s: Session) -> BudgetError | None:
    """A :class:`BudgetError` naming each limit the plan exceeds, or ``None`` when it fits."""
    rows = [r for r in plan_.budget if not r.fits]
    if not rows:
        return None
    return _budget_refusal(rows, s)


def _budget_refusal(rows: list[EndpointBudget], s: Session) -> BudgetError:
    lines = [shortfall_message(r) for r in rows]
    error = BudgetError(
        "the plan does not fit the token's rate limits; nothing was sent:\n" + "\n".join(f"  - {x}" for x in lines),
        hint="Wait for the reset, raise or remove budget.reserve in the manifest, or lift the limits for two hours "
        "with the no-rate-limit page (open it and press Proceed).",
    )
    for server in sorted({r.server for r in rows}):
        link = s.unlock_link(server)
        if link is not None:
            error.unlock_links[server] = link
    return error


def recheck_budget(plan_: Plan, s: Session, extra_needs: Mapping[str, Mapping[str, int]] | None = None) -> None:
    """Check the plan's requests (plus ``extra_needs`` per server) against the ledger as it is now."""
    failing = _failing_rows(plan_, s, extra_needs)
    learnt = [s.learn_unlimited(server) for server in sorted({r.server for r in failing})]
    if any(learnt):
        failing = _failing_rows(plan_, s, extra_needs)
    if failing:
        raise _budget_refusal(failing, s)


def _failing_rows(plan_: Plan, s: Session, extra_needs: Mapping[str, Mapping[str, int]] | None) -> list[EndpointBudget]:
    now = s.options.clock.now()
    failing: list[EndpointBudget] = []
    for server in plan_.servers():
        needs = requests_needed([b for b in plan_.branches if b.server == server])
        for endpoint, count in (extra_needs or {}).get(server, {}).items():
            needs[endpoint] = needs.get(endpoint, 0) + count
        failing.extend(_short_rows(s, server, needs, now))
    return failing


def _short_rows(s: Session, server: str, needs: Mapping[str, int], now: float) -> list[EndpointBudget]:
    """The budget rows of ``needs`` that do not fit what the ledger knows remains (none for a password login)."""
    facts = s.budget_facts(server)
    if not facts.limited:
        return []
    rows = assess(
        server, needs, facts.windows, reserve=facts.reserve or {}, unlimited_until=facts.unlimited_until, now=now
    )
    return [r for r in rows if not r.fits]


def check_saved_plan(plan_: Plan, loaded: LoadedManifest) -> None:
    """A saved plan must have been made from this manifest, unchanged."""
    if plan_.manifest_digest != loaded.digest:
        raise PlanFileError(
            f"the plan no longer matches the manifest {loaded.path}: it was made from a different version of it",
            hint="Make the plan again with the current manifest: 'gitops plan --out FILE'.",
        )
    configured = {(b.server, b.branch) for b in loaded.manifest.branches}
    for branch in plan_.branches:
        if (branch.server, branch.branch) not in configured:
            raise PlanFileError(
                f"the plan names {branch.label}, which the manifest {loaded.path} does not have",
                hint="Make the plan again with the current manifest: 'gitops plan --out FILE'.",
            )
