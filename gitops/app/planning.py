"""The plan use case: read the local code, learn what the servers hold through read-only readers, build the plan,
and the budget gates (the one place that decides whether requests fit what remains of the token's limits).

The decisions stay in the pure core (``gitops.core.plan``, ``gitops.core.budget``); this module owns the order of
I/O. It never prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from gitops.app.localcode import read_code
from gitops.app.options import Refresh
from gitops.app.session import Session
from gitops.config.manifest import BranchConfig, LoadedManifest
from gitops.core.budget import EndpointBudget, assess, shortfall_message
from gitops.core.endpoints import DOWNLOAD
from gitops.core.plan import Plan, ServerFailure, build_plan, requests_needed
from gitops.core.remote import BranchInfo, RemoteBranch, RemoteView
from gitops.errors import AuthError, BudgetError, GitopsError, PlanFileError, ScopeError, ServiceError

#: Extra requests per server and endpoint, beyond what a plan's steps spend (e.g. the downloads of a check).
Needs = Mapping[str, Mapping[str, int]]


#: The errors that belong to one server: with isolation, planning reports them and goes on with the others. Errors
#: of the local code, the manifest or the usage concern every server and always stop the run.
SERVER_ERRORS: tuple[type[GitopsError], ...] = (ServiceError, AuthError, BudgetError)


def make_plan(s: Session, *, isolate: bool = False) -> Plan:
    """Read the local code, learn the servers' state, and build the plan (:func:`budget_error` says whether it
    fits; planning itself refuses only downloads that would not fit).

    With ``isolate``, a server whose planning fails (:data:`SERVER_ERRORS`) does not stop the others: its branches
    are left out and it is recorded in :attr:`Plan.failed` with its message and exit code; when every server
    failed, the worst error (highest exit code) is raised. Without it, the first such error is raised before
    anything is written.
    """
    options = s.options
    local = read_code(s.loaded, options.ref, options.env)
    failed: dict[str, GitopsError] | None = {} if isolate else None
    views = gather_remote(s, options.refresh, failed)
    failures = failed or {}
    if failures and len(failures) == len(s.servers()):
        # Nothing left to show: the run fails as it would without isolation, with the worst failure's error.
        raise max(failures.values(), key=lambda exc: exc.exit_code)
    if failures:
        local = dataclasses.replace(local, branches=[b for b in local.branches if b.server not in failures])
    servers = [server for server in s.servers() if server not in failures]
    now = options.clock.now()
    budgets = {server: s.budget_facts(server) for server in servers}
    result = build_plan(loaded=s.loaded, local=local, remote=views, budgets=budgets, refresh=options.refresh, now=now)
    short = {row.server for row in result.budget if not row.fits}
    # Every short server is asked (no short-circuit): each one's ledger learns its own unlimited state.
    learnt = [s.learn_unlimited(server) for server in sorted(short)]
    if any(learnt):
        budgets = {server: s.budget_facts(server) for server in servers}
        result = build_plan(
            loaded=s.loaded, local=local, remote=views, budgets=budgets, refresh=options.refresh, now=now
        )
    update: dict[str, object] = {}
    extra = s.warnings()
    if extra:
        update["warnings"] = [*result.warnings, *extra]
    if failures:
        update["failed"] = [
            ServerFailure(
                server=server,
                branches=[b.branch for b in s.loaded.manifest.branches if b.server == server],
                message=str(exc),
                exit_code=exc.exit_code,
            )
            for server, exc in sorted(failures.items())
        ]
    return result.model_copy(update=update) if update else result


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


def gather_remote(s: Session, refresh: Refresh, failed: dict[str, GitopsError] | None = None) -> dict[str, RemoteView]:
    """Learn what each server holds, spending as few downloads as the refresh policy allows.

    Before any request, the downloads it needs are checked against what is known to remain of
    ``GET /api/user/code`` (60 per hour); :class:`BudgetError` if they would not fit. Each server's reads are one
    step: the ledger is saved after them.

    With ``failed`` (a dict to fill), a server whose budget check or reads raise one of :data:`SERVER_ERRORS` is
    recorded there and left out of the views, and the other servers are still read.
    """
    now = s.options.clock.now()
    trust = float(s.loaded.manifest.budget.trust_own_upload_seconds)
    views: dict[str, RemoteView] = {}
    configs = s.loaded.manifest.branches
    wanted: dict[str, list[BranchConfig]] = {}
    for server in s.servers():
        try:
            ledger = s.ledger(server)
            to_download = [
                c
                for c in configs
                if c.server == server and _needs_download(c, ledger.remembered_branch(c.branch), refresh, trust, now)
            ]
            wanted[server] = to_download
            check_download_budget(s, server, len(to_download))
        except SERVER_ERRORS as exc:
            if failed is None:
                raise
            failed[server] = exc
    for server in s.servers():
        if failed and server in failed:
            continue
        try:
            views[server] = _read_server(s, server, refresh, wanted[server])
        except SERVER_ERRORS as exc:
            if failed is None:
                raise
            failed[server] = exc
            s.save()  # what the failed server's reads taught (a 429's headers, say) is kept
    return views


def _read_server(s: Session, server: str, refresh: Refresh, wanted: list[BranchConfig]) -> RemoteView:
    """One server's reads (the branch list, the downloads of ``wanted``), then a save of its ledger."""
    configs = s.loaded.manifest.branches
    ledger = s.ledger(server)
    branches: dict[str, RemoteBranch | None] = {}
    if refresh == "never":
        remembered = ledger.remembered_branch_list()
        for c in configs:
            if c.server == server:
                branches[c.branch] = _from_ledger(ledger.remembered_branch(c.branch))
        return RemoteView(
            server,
            tuple(remembered[0]) if remembered else None,
            branches,
            remembered[1] if remembered else None,
        )
    reader = s.reader(server)
    listing: list[BranchInfo] | None
    try:
        listing = reader.list_branches()
    except ScopeError:
        # A token restricted to the code endpoints: existence comes from the download, activation is unknown
        # (and so re-sent by apply).
        listing = None
    learnt_at = s.options.clock.now()
    download = {c.branch for c in wanted}
    for c in configs:
        if c.server != server:
            continue
        if listing is not None and c.branch not in {b.name for b in listing}:
            branches[c.branch] = RemoteBranch.missing(c.branch, learnt_at)
        elif c.branch in download:
            code = reader.get_code(c.branch)
            at = s.options.clock.now()
            branches[c.branch] = (
                RemoteBranch.missing(c.branch, at) if code is None else RemoteBranch.from_code(c.branch, code, at)
            )
        else:
            branches[c.branch] = _from_ledger(ledger.remembered_branch(c.branch))
    s.save()
    if listing is None:
        # Without the branch list, which branches are active is what this tool last set (from the ledger).
        remembered = ledger.remembered_branch_list()
        return RemoteView(server, tuple(remembered[0]) if remembered else None, branches, learnt_at)
    return RemoteView(server, tuple(listing), branches, learnt_at)


# --- the budget gates: the one place that decides what fits ----------------------------------------------------


def check_download_budget(
    s: Session,
    server: str,
    needed: int,
    *,
    doing: str = "planning",
    instead: str = "Plan from the ledger with --refresh=never (no download), wait",
) -> None:
    """Refuse, before any request, downloads that would not fit what remains of ``GET /api/user/code``.

    ``doing`` names who needs them in the message (``planning``, ``the pull``); ``instead`` starts the hint with
    what else the person can do.
    """
    if not needed:
        return
    rows = _short_rows(s, server, {DOWNLOAD: needed})
    if rows and s.learn_unlimited(server):
        rows = _short_rows(s, server, {DOWNLOAD: needed})
    if rows:
        raise BudgetError(
            f"{doing} needs more downloads than remain; nothing was sent:\n"
            + "\n".join(f"  - {shortfall_message(r)}" for r in rows),
            hint=f"{instead} for the reset, or lift the limits for two hours: 'gitops unlock --server {server}' "
            "prints the no-rate-limit link.",
        )


def budget_error(plan: Plan, s: Session) -> BudgetError | None:
    """A :class:`BudgetError` naming each limit the plan exceeds (as it was planned), or ``None`` when it fits."""
    rows = [r for r in plan.budget if not r.fits]
    if not rows:
        return None
    return _budget_refusal(rows, s)


def recheck_budget(plan: Plan, s: Session, extra_needs: Needs | None = None) -> None:
    """Check the plan's requests (plus ``extra_needs`` per server) against the ledger as it is now; raise the
    :class:`BudgetError` (with the unlock links) when they do not fit."""
    failing = _failing_rows(plan, s, extra_needs)
    learnt = [s.learn_unlimited(server) for server in sorted({r.server for r in failing})]
    if any(learnt):
        failing = _failing_rows(plan, s, extra_needs)
    if failing:
        raise _budget_refusal(failing, s)


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


def _failing_rows(plan: Plan, s: Session, extra_needs: Needs | None) -> list[EndpointBudget]:
    failing: list[EndpointBudget] = []
    for server in plan.servers():
        needs = requests_needed([b for b in plan.branches if b.server == server])
        for endpoint, count in (extra_needs or {}).get(server, {}).items():
            needs[endpoint] = needs.get(endpoint, 0) + count
        failing.extend(_short_rows(s, server, needs))
    return failing


def _short_rows(s: Session, server: str, needs: Mapping[str, int]) -> list[EndpointBudget]:
    """The budget rows of ``needs`` that do not fit what the ledger knows remains (none for a password login)."""
    facts = s.budget_facts(server)
    if not facts.limited:
        return []
    rows = assess(
        server,
        needs,
        facts.windows,
        reserve=facts.reserve or {},
        unlimited_until=facts.unlimited_until,
        now=s.options.clock.now(),
    )
    return [r for r in rows if not r.fits]


def check_saved_plan(plan: Plan, loaded: LoadedManifest) -> None:
    """A saved plan must have been made from this manifest, unchanged (:class:`PlanFileError` otherwise)."""
    if plan.manifest_digest != loaded.digest:
        raise PlanFileError(
            f"the plan no longer matches the manifest {loaded.path}: it was made from a different version of it",
            hint="Make the plan again with the current manifest: 'gitops plan --out FILE'.",
        )
    configured = {(b.server, b.branch) for b in loaded.manifest.branches}
    for branch in plan.branches:
        if (branch.server, branch.branch) not in configured:
            raise PlanFileError(
                f"the plan names {branch.label}, which the manifest {loaded.path} does not have",
                hint="Make the plan again with the current manifest: 'gitops plan --out FILE'.",
            )
