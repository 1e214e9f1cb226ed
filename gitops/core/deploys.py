"""Deployment state (issue 39), pure: each branch's verification state, the history of deploys, which code is kept
for an undo, and the choice of the deploy a manual rollback restores. No I/O, no clock: times come in.

A deploy whose watch was cut short, or whose code failed, must not be forgotten by the next run: so the state is
recorded before the watch begins and kept until a later deploy replaces it, and an unsettled one (:data:`UNSETTLED`,
the states are :data:`VerifyState`'s) makes ``plan``/``apply``/``drift`` say so with exit code 12. The ledger
(``edges/ledger/``) keeps these records; ``app/deploys.py`` writes them around a deploy and its watch and reads
them for ``plan``, ``apply``, ``drift``, ``status``, ``history`` and ``rollback``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Literal

from gitops.core.driftfinding import Drift

# States of a branch's verification:
#
# * ``pending``: recorded before the watch begins, saved at once: a run killed during the watch (``kill -9``) leaves
#   it, and the next run reports it as unverified;
# * ``interrupted``: SIGINT or SIGTERM came during the watch; the step in flight was finished and the watch stopped;
# * ``healthy`` / ``unknown``: judged (unknown: no evidence either way, e.g. the server's own errors);
# * ``failing``: judged failing and left in place, or rolled back but the code after the undo was not judged healthy;
# * ``rolled-back``: judged failing, undone, and the code after the undo judged healthy;
# * ``rollback-failed``: judged failing and the undo failed: the failing code is still on the server.
VerifyState = Literal["pending", "interrupted", "healthy", "unknown", "failing", "rolled-back", "rollback-failed"]
#: The unsettled states: the deploy is unverified or failing, and ``plan``/``apply``/``drift`` say so with exit code
#: 12 until a new deploy, ``apply --verify-again`` or ``gitops rollback`` replaces the record.
UNSETTLED: frozenset[str] = frozenset({"pending", "interrupted", "failing", "rollback-failed"})
DeployHow = Literal["apply", "rollback"]

#: Deploys kept in a ledger's history (per server account), newest last; older ones are dropped.
HISTORY_LIMIT = 50
#: Per branch, the code of this many of its newest deploys is kept for ``gitops rollback`` (plus the code an
#: unsettled verification would restore); the rest of the history keeps digests only.
CODE_KEPT = 5
#: How long a recorded reason may be.
REASON_CHARS = 300


@dataclass(frozen=True, slots=True)
class VerifyRecord:
    """The verification state of a branch's last deploy, with what is needed to undo it."""

    branch: str
    state: VerifyState
    #: The digest of the deployed code set, and the commit it came from (when known).
    digest: str | None
    commit: str | None
    applied_at: float
    recorded_at: float
    reason: str = ""
    #: How the deploy would be undone: ``restore`` the code of ``restore_digest`` (kept beside the ledger), or
    #: activate ``standby`` again for ``standby_for``; ``none`` when there is nothing to undo to.
    undo: Literal["restore", "standby", "none"] = "none"
    restore_digest: str | None = None
    standby: str | None = None
    standby_for: tuple[str, ...] = ()

    @property
    def unsettled(self) -> bool:
        return self.state in UNSETTLED


@dataclass(frozen=True, slots=True)
class Deploy:
    """One deploy in the history: which code went to which branch, when, how, and its verification's state."""

    n: int
    branch: str
    digest: str | None
    commit: str | None
    applied_at: float
    how: DeployHow = "apply"
    state: VerifyState | None = None


@dataclass(frozen=True, slots=True)
class UnsettledDeploy:
    """A branch whose last deploy is unverified or failing, as ``plan``, ``apply``, ``drift`` and the Action show it
    (a :class:`VerifyRecord` with its server; carried by the plan, so every renderer has it)."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    server: str
    branch: str
    state: VerifyState
    reason: str
    commit: str | None
    applied_at: float
    undo: Literal["restore", "standby", "none"] = "none"

    @property
    def label(self) -> str:
        return f"{self.server}/{self.branch}"

    def line(self) -> str:
        """``local/main: PENDING (deployed abc123def456, its watch never ended): ...`` and what to do."""
        commit = f" {self.commit[:12]}" if self.commit else ""
        what = {
            "pending": "UNVERIFIED: its watch never ended (the run was killed)",
            "interrupted": "UNVERIFIED: its watch was interrupted",
            "failing": "FAILING",
            "rollback-failed": "FAILING: its rollback failed",
        }.get(self.state, self.state.upper())
        undo = "gitops rollback" + (" (restores the code kept for it)" if self.undo == "restore" else "")
        tail = f": {self.reason}" if self.reason else ""
        return (
            f"{self.label}: deploy{commit} {what}{tail}; judge it again with 'gitops apply --verify-again' "
            f"or undo it with '{undo}'"
        )


def short_reason(text: str) -> str:
    """A reason as recorded: its first line, at most :data:`REASON_CHARS` characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def outcome_state(result: str, after: str | None, *, interrupted: bool) -> VerifyState:
    """The state a verification's result is recorded as (``result``: ``app.verifying.Verification.result``;
    ``after``: the health status after an undo). Interrupted wins: the watch did not end."""
    if interrupted:
        return "interrupted"
    if result == "rolled-back":
        return "rolled-back" if after == "healthy" else "failing"
    return {
        "healthy": "healthy",
        "unknown": "unknown",
        "unhealthy": "failing",
        "undo-failed": "rollback-failed",
    }.get(result, "failing")  # type: ignore[return-value]


def add_deploy(history: Sequence[Deploy], deploy: Deploy, *, limit: int = HISTORY_LIMIT) -> list[Deploy]:
    """``history`` with ``deploy`` appended as the next number (its ``n`` is set), the oldest dropped past
    ``limit``."""
    number = (history[-1].n if history else 0) + 1
    return [*history, replace(deploy, n=number)][-limit:]


def with_state(history: Sequence[Deploy], branch: str, state: VerifyState) -> list[Deploy]:
    """``history`` with the newest deploy of ``branch`` given ``state``."""
    out = list(history)
    for i in range(len(out) - 1, -1, -1):
        if out[i].branch == branch:
            out[i] = replace(out[i], state=state)
            break
    return out


def kept_digests(
    history: Sequence[Deploy], records: Iterable[VerifyRecord], *, per_branch: int = CODE_KEPT
) -> set[str]:
    """The digests whose code is kept: the newest ``per_branch`` distinct digests of each branch's deploys, and the
    code each verification record would restore."""
    kept: set[str] = set()
    counts: dict[str, list[str]] = {}
    for deploy in reversed(history):
        seen = counts.setdefault(deploy.branch, [])
        if deploy.digest is not None and deploy.digest not in seen and len(seen) < per_branch:
            seen.append(deploy.digest)
            kept.add(deploy.digest)
    kept.update(r.restore_digest for r in records if r.restore_digest is not None)
    return kept


def rollback_target(
    history: Sequence[Deploy], branch: str, to: int | None, current: str | None, restore: str | None = None
) -> Deploy:
    """The deploy ``gitops rollback`` restores on ``branch``: number ``to``, else the code the branch's unsettled
    verification would restore (``restore``), else its newest deploy whose code differs from ``current`` (the
    digest the branch holds now). ``ValueError`` saying why there is none."""
    mine = [d for d in history if d.branch == branch]
    if to is not None:
        found = [d for d in history if d.n == to]
        if not found:
            known = ", ".join(str(d.n) for d in mine[-10:]) or "none"
            raise ValueError(f"there is no deploy {to} in the history (deploys of {branch}: {known})")
        if found[0].branch != branch:
            raise ValueError(f"deploy {to} went to branch {found[0].branch}, not {branch}")
        return found[0]
    if restore is not None:
        for deploy in reversed(mine):
            if deploy.digest == restore:
                return deploy
        return Deploy(0, branch, restore, None, 0.0)  # the code the branch held before the tool's first deploy
    for deploy in reversed(mine):
        if deploy.digest is not None and deploy.digest != current:
            return deploy
    raise ValueError(f"the history holds no earlier code of {branch} than what it runs now")


__all__ = [
    "CODE_KEPT",
    "HISTORY_LIMIT",
    "UNSETTLED",
    "Deploy",
    "UnsettledDeploy",
    "VerifyRecord",
    "VerifyState",
    "add_deploy",
    "kept_digests",
    "outcome_state",
    "rollback_target",
    "short_reason",
    "with_state",
]


@dataclass(frozen=True, slots=True)
class BranchStatus:
    """What ``gitops status`` shows of one branch: its deployment state beside what the server holds now (made by
    :mod:`gitops.app.status`, shown by :mod:`gitops.render.deploys`)."""

    server: str
    branch: str
    #: From the branch list asked now: whether the branch exists, and for what it is active.
    exists: bool | None
    active: tuple[str, ...]
    #: From the ledger: the last deploy (commit, time) and its verification.
    commit: str | None
    applied_at: float | None
    digest: str | None
    verification: VerifyRecord | None
    #: Why the server could not be asked (the rest is the ledger's).
    problem: str | None = None
    #: What the server holds, compared with the last applied record: ``none`` (that code, checked now),
    #: ``drifted`` (changed outside Git), ``unknown`` (not checked now: the ledger's word), ``no-record``.
    drift: Drift | None = None
    #: What the check rests on: ``download`` or ``branch-list`` (this run asked the server), else ``None``.
    checked: str | None = None
    checked_at: float | None = None
    #: Why the server's code was not checked though the server answered (the download budget, say).
    unchecked: str | None = None

    @property
    def verified(self) -> bool:
        return self.checked is not None
