"""The lines an apply's outcome is told in, shared by the plan's renderers (:mod:`gitops.render.plan`) and the
apply report (:class:`gitops.app.applying.ApplyReport`): the use case keeps its report's words without importing a
renderer, and the renderers show the same words. Pure: text from the plan's values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: the report's lines are asked of a plan already made
    from gitops.core.plan import BranchPlan, Plan


def age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.1f} days ago"


NOT_CHECKED = "not checked on the server"


def _unverified_basis(branch: BranchPlan, now: float) -> str:
    when = age(now - (branch.remote.learnt_at or now))
    if branch.remote.how == "own-upload":
        return f"this tool's upload {when}"
    return f"the ledger's record of {when}"


def no_changes_line(plan: Plan, *, now: float, head: str) -> str:
    """``head`` ("No changes", "Nothing to apply") with what it rests on: the servers, when every branch was
    verified in this run; otherwise the records it was not checked against."""
    unchecked = [b for b in plan.branches if not b.remote.verified]
    if not unchecked:
        return f"{head}: the servers hold what the repository holds." if head == "No changes" else f"{head}."
    if len(unchecked) == 1 and len(plan.branches) == 1:
        return f"{head} since {_unverified_basis(unchecked[0], now)} ({NOT_CHECKED})."
    listed = "; ".join(f"{b.label}: {_unverified_basis(b, now)}" for b in unchecked)
    return f"{head} since what this tool last knew ({NOT_CHECKED}: {listed})."


def applied_line(plan: Plan) -> str:
    changed = [b for b in plan.branches if b.has_changes]
    return (
        f"Applied: {len(changed)} branch(es) changed with {plan.uploads_needed} upload(s); "
        "the servers now hold what the plan holds."
    )
