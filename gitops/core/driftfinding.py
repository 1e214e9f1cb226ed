"""The drift finding of one branch: the value a plan carries (``BranchPlan.drift``) and ``gitops drift`` reports.

It has a module of its own because both sides need it: :mod:`gitops.core.plan` holds it in each branch, and
:mod:`gitops.core.drift`, which decides it, also attaches it to a plan. Here, neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from gitops.core.applied import AppliedHow

DriftStatus = Literal["drifted", "none", "no-record", "unknown"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Drift:
    """The drift finding of one branch.

    ``status``: ``drifted`` (the server differs from the last applied record: ``added``/``changed``/``removed``
    name the modules changed outside Git, relative to that record; ``missing`` when the branch is gone),
    ``none`` (the server holds what was last applied, or a pending upload's set), ``no-record`` (this tool never
    applied the branch: nothing to compare with, not drift) or ``unknown`` (the server's code was not learnt now:
    planned from the ledger or from the tool's own upload).

    A frozen dataclass made without validation; validated (unknown fields refused) when a plan file is read.
    """

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    status: DriftStatus
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    missing: bool = False
    applied_at: float | None = None
    applied_how: AppliedHow | None = None
    commit: str | None = None
    #: The server holds the set of an upload whose outcome this tool did not learn (its answer was lost).
    pending_landed: bool = False
    #: What the server's code was compared with besides the last applied record: the repository's code, read from
    #: this source (``worktree``, ``ref main``); ``None`` when the repository was not read.
    repository: str | None = None
    #: The server holds exactly the repository's code (another machine, or CI, deployed it): no drift.
    equals_repository: bool = False

    @property
    def drifted(self) -> bool:
        return self.status == "drifted"

    def modules_text(self, limit: int | None = None) -> str:
        """``~ main, + hack, - role/x``: the modules changed outside Git, or that the branch is gone; with ``limit``
        at most that many names, then how many more (a job summary or an issue has a size limit)."""
        if self.missing:
            return "the branch was deleted"
        parts = [f"~ {n}" for n in self.changed] + [f"+ {n}" for n in self.added] + [f"- {n}" for n in self.removed]
        if limit is not None and len(parts) > limit:
            return ", ".join(parts[:limit]) + f" and {len(parts) - limit} more"
        return ", ".join(parts)
