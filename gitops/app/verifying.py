"""Verified rollout: after a branch is applied, watch the account's console, judge the deploy, and undo it when it
fails and the manifest says so (``verify:``; docs/safe-deploys.md).

``verify_branch`` is called by ``app/applying.py`` once a server's steps are done. It never prints; its
:class:`Verification` says what ran, what failed (the evidence) and what runs now, and picks its exit code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from gitops.app.session import Session
from gitops.config.manifest import ActiveName
from gitops.core.codeset import WireModule
from gitops.core.health import ConsoleEvent, Health, Thresholds, TickTally, unknown
from gitops.core.plan import BranchPlan, VerifyStep
from gitops.errors import ExitCode, GitopsError
from gitops.secrets import redact

Result = Literal["healthy", "unknown", "unhealthy", "rolled-back", "undo-failed"]

#: Ticks ignored at the start of a watch: the tick in progress when the watch began may still run the old code.
SETTLE_TICKS = 1


@dataclass(frozen=True, slots=True)
class Verification:
    """The health check of one branch and what was done about it."""

    label: str
    health: Health
    #: ``restored``: the previous code was uploaded again; ``switched-back``: the standby branch that ran before was
    #: activated again; ``undo-failed``: that upload or activation failed.
    action: Literal["none", "restored", "switched-back", "undo-failed"] = "none"
    #: What the undo did, in words (``activated default again for world``).
    undo: str | None = None
    #: The health after the undo (``None`` when there was none).
    after: Health | None = None
    #: The undo's error, when it failed.
    undo_error: str | None = None

    @property
    def result(self) -> Result:
        if self.action == "undo-failed":
            return "undo-failed"
        if self.action in ("restored", "switched-back"):
            return "rolled-back"
        if self.health.status == "failing":
            return "unhealthy"
        return self.health.status

    #: SIGINT/SIGTERM stopped the watch (the step in flight was finished; nothing more was sent).
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        """10 only when the code after the undo was judged healthy; an undo not judged healthy after is 9 (the branch
        may still fail); an interrupted watch is 12 (the deploy is unverified)."""
        if self.interrupted:
            return ExitCode.UNVERIFIED
        if self.result == "rolled-back" and (self.after is None or self.after.status != "healthy"):
            return ExitCode.UNHEALTHY
        return {
            "healthy": ExitCode.OK,
            "unknown": ExitCode.OK,
            "unhealthy": ExitCode.UNHEALTHY,
            "rolled-back": ExitCode.ROLLED_BACK,
            "undo-failed": ExitCode.UNDO_FAILED,
        }[self.result]

    def lines(self) -> list[str]:
        """What the CLI prints and the Action records (evidence already redacted)."""
        h = self.health
        out = [f"verify {self.label}: {h.status.upper()}: {h.reason}"]
        if self.interrupted:
            out[0] = f"verify {self.label}: INTERRUPTED after {h.ticks_seen} tick(s), so far {h.status}: {h.reason}"
        out += [f"  error: {line}" for e in h.evidence for line in e.splitlines()[:1]]
        if h.bot_frame is not None:
            module, _, line = h.bot_frame.rpartition(":")
            out.append(f"  at module {module}, line {line} (the top frame in the bot's own code)")
        if self.action in ("restored", "switched-back"):
            out.append(f"  rolled back: {self.undo}")
            if self.after is not None:
                out.append(f"  after the rollback: {self.after.status.upper()}: {self.after.reason}")
        elif self.action == "undo-failed":
            out.append(f"  ROLLBACK FAILED ({self.undo}): {self.undo_error}")
            out.append(f"  the server still runs the new, failing code of {self.label}")
        elif h.status == "failing" and not self.interrupted:
            out.append(f"  left in place (on_failure: report): the new code still runs on {self.label}")
        if self.interrupted:
            out.append(
                f"  the deploy of {self.label} is recorded as interrupted (unverified): 'gitops apply --verify-again' "
                "judges it again, 'gitops rollback' undoes it"
            )
        return out

    def document(self) -> dict[str, object]:
        return {
            "branch": self.label,
            "result": self.result,
            "health": self.health.to_json(),
            "action": self.action,
            "undo": self.undo,
            "after": None if self.after is None else self.after.to_json(),
            "undo_error": self.undo_error,
            "interrupted": self.interrupted,
        }


#: Exit codes of verifications from the least to the most serious: a run with several reports its most serious.
SEVERITY: tuple[int, ...] = (
    ExitCode.OK,
    ExitCode.ROLLED_BACK,
    ExitCode.UNHEALTHY,
    ExitCode.UNVERIFIED,
    ExitCode.UNDO_FAILED,
)


def worst(codes: Iterable[int]) -> int:
    """The most serious of ``codes`` (:data:`SEVERITY`); 0 for none."""
    return max(codes, key=SEVERITY.index, default=ExitCode.OK)


def watch_after_deploy(
    session: Session, server: str, step: VerifyStep, bot_modules: frozenset[str] | None = None
) -> Health:
    """Watch the console of ``server``'s account for the step's ticks (bounded by its time limit, cut short by a
    SIGINT/SIGTERM: ``session.options.interrupt``) and judge; ``bot_modules``: the deployed code's module names."""
    # The game socket (websockets): only a branch with verify: needs it, and applying is imported by every plan.
    from gitops.edges.socket import socket_url, watch_console  # noqa: PLC0415, RUF100 (boundary: the game socket)

    interrupt = session.options.interrupt
    if interrupt.is_set:
        return unknown("interrupted before the watch began")
    thresholds = Thresholds(ticks=step.ticks, error_share=step.error_share, fail_on=tuple(step.fail_on))
    try:
        client = session.client(server)
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


__all__ = ["SEVERITY", "Verification", "verify_branch", "watch_after_deploy", "worst"]
