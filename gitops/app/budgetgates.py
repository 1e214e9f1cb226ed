"""The budget gates: the one place that decides whether requests fit what remains of the token's limits, and
whether the token may use the endpoints a plan needs (:func:`scope_error`).

Before any download (:func:`check_download_budget`, for planning, pull, drift and status alike), for a plan as it
was planned (:func:`budget_error`) and again just before its apply with the ledger as it is now
(:func:`recheck_budget`). The numbers and the rate-limit windows are the pure core's (:mod:`gitops.core.budget`);
a gate reads them from the session's ledger. It never prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from gitops.app.session import Session
from gitops.core.budget import EndpointBudget, assess, shortfall_message
from gitops.core.endpoints import DOWNLOAD
from gitops.errors import BudgetError, ScopeError

if TYPE_CHECKING:  # the plan model is imported once the servers have answered (planning's AFTER_THE_SERVERS)
    from gitops.core.plan import Plan

#: Extra requests per server and endpoint, beyond what a plan's steps spend (e.g. the downloads of a check).
Needs = Mapping[str, Mapping[str, int]]


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
    failing: list[EndpointBudget] = []
    for server in plan.servers():
        needs = plan.requests_on(server)
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
