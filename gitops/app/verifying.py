"""Verified rollout: after a branch is applied, watch the account's console, judge the deploy, and undo it when it
fails and the manifest says so (``verify:``; docs/safe-deploys.md).

``verify_branch`` is called by ``app/applying.py`` once a server's steps are done. It never prints; its
:class:`gitops.core.health.Verification` says what ran, what failed (the evidence) and what runs now, and picks
its exit code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from gitops.app.session import Session
from gitops.config.manifest import ActiveName
from gitops.core.codeset import WireModule
from gitops.core.health import (
    SETTLE_TICKS,
    ConsoleEvent,
    Health,
    Thresholds,
    TickTally,
    Verification,
    runs_no_code,
    unknown,
)
from gitops.core.plan import BranchPlan, VerifyStep
from gitops.errors import GitopsError
from gitops.secrets import redact

if TYPE_CHECKING:  # the client is the session's; only its type here
    from gitops.edges.service.client import ServiceClient


def watch_after_deploy(
    session: Session, server: str, step: VerifyStep, bot_modules: frozenset[str] | None = None
) -> Health:
    """Watch the console of ``server``'s account for the step's ticks (bounded by its time limit, cut short by a
    SIGINT/SIGTERM: ``session.options.interrupt``) and judge; ``bot_modules``: the deployed code's module names."""
    # The game socket (websockets): only a branch with verify: needs it, and applying is imported by every plan.
    from gitops.edges.socket import socket_url, watch_console  # noqa: PLC0415 (boundary: the game socket)

    interrupt = session.options.interrupt
    if interrupt.is_set:
        return unknown("interrupted before the watch began")
    thresholds = Thresholds(ticks=step.ticks, error_share=step.error_share, fail_on=tuple(step.fail_on))
    try:
        client = session.client(server)
        stand_in = runs_no_code(_version(client))
        if stand_in is not None:
            return unknown(stand_in)  # an empty console there is no evidence: never "healthy"
        user_id, token = client.socket_login()
        url = socket_url(client.base_url)
    except GitopsError as exc:
        return unknown(f"the game socket cannot be used: {redact(exc.message)}")
    except ValueError as exc:
        return unknown(f"the game socket cannot be used: {redact(str(exc))}")
    wanted = SETTLE_TICKS + step.ticks + 1  # the last one only closes the one before (its error may follow it)
    # Counted as the events come, never kept: a server may stream without end (or send huge ticks).
    tally = TickTally(thresholds, skip=SETTLE_TICKS, limit=step.ticks, bot_modules=bot_modules)

    def take(event: ConsoleEvent) -> bool:
        tally.add(event)
        return tally.opened >= wanted

    problem = watch_console(
        url, token, user_id, seconds=step.timeout, on_event=take, debug=session.options.log, stop=interrupt.event.is_set
    )
    if interrupt.is_set:  # whatever the socket said as it was cut short (an auth left unanswered, say)
        problem = f"interrupted by {interrupt.signal_name or 'a signal'}"
    return tally.judge_counted(problem=problem, timeout=step.timeout)


def _version(client: ServiceClient) -> dict[str, Any] | None:
    """The server's ``/api/version`` answer, or ``None`` when it has none to give (an error, a server without it)."""
    try:
        return client.server_version()
    except GitopsError:
        return None


def verify_branch(
    session: Session,
    branch: BranchPlan,
    previous: Mapping[str, WireModule] | None,
    *,
    restore: Callable[[Mapping[str, WireModule]], None],
    switch: Callable[[str, list[ActiveName]], None],
    bot_modules: frozenset[str] | None = None,
    standby_modules: frozenset[str] | None = None,
) -> Verification:
    """Judge ``branch`` after its steps; on failure with a reserved rollback, undo it and judge again: ``restore``
    the previous code (the caller's upload, so the ledger sees it), or ``switch`` back to the standby branch that ran
    before (the caller's activations). Only what the plan reserved is ever sent."""
    step = branch.verify
    assert step is not None
    health = watch_after_deploy(session, branch.server, step, bot_modules)
    if session.options.interrupt.is_set:
        # The watch was the step in flight: nothing more is sent after a signal (``gitops rollback`` undoes).
        return Verification(branch.label, health, interrupted=True)
    if health.status != "failing":
        return Verification(branch.label, health)
    server = branch.server
    if step.reserves_upload and previous is not None:
        action: Literal["restored", "switched-back"] = "restored"
        words = f"the previous code was uploaded again to {branch.label}"
        after_modules: frozenset[str] | None = frozenset(previous)

        def undo() -> None:
            restore(previous)

    elif step.reserved_activations and step.switch_back is not None:
        back, which = step.switch_back, list(step.switch_for)
        action = "switched-back"
        words = f"{server}/{back} was activated again for {', '.join(which)}"
        after_modules = standby_modules

        def undo() -> None:
            switch(back, which)

    else:
        return Verification(branch.label, health)
    try:
        undo()
    except GitopsError as exc:
        return Verification(branch.label, health, "undo-failed", undo=words, undo_error=redact(exc.message))
    # The undo was the step in flight when a signal came during it: finished; the watch after it is then skipped.
    after = watch_after_deploy(session, server, step, after_modules)
    interrupted = session.options.interrupt.is_set
    return Verification(branch.label, health, action, undo=words, after=after, interrupted=interrupted)


__all__ = ["SETTLE_TICKS", "verify_branch", "watch_after_deploy"]
