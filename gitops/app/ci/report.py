"""What one CI run found out (:class:`Report`): what the outputs, the summary and the comment are made of, whatever
the run raised. The Markdown of it is the front end's (:mod:`gitops.github.report` for GitHub)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gitops.app.ci.host import Command
from gitops.config.routes import RouteChange
from gitops.errors import ExitCode, GitopsError

if TYPE_CHECKING:
    from gitops.app.rehearsal import Rehearsal
    from gitops.core.drift import DriftReport
    from gitops.core.health import Verification
    from gitops.core.plan import Plan
    from gitops.core.rehearsalresult import RehearsalResult


@dataclass
class Report:
    """What a run found out, for the outputs, the summary and the comment."""

    command: Command
    manifest: str
    plan: Plan | None = None
    plan_file: Path | None = None
    notices: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    applied: bool = False
    error: GitopsError | None = None
    exit_code: int = ExitCode.OK
    comment_url: str = ""
    #: ``command: drift``: the :class:`gitops.core.drift.DriftReport`, and the drift issue's address.
    drift: DriftReport | None = None
    issue_url: str = ""
    #: ``command: apply``: per (server, branch) the apply set out to change, whether every step of it was done.
    deployed: dict[tuple[str, str], bool] = field(default_factory=dict)
    #: ``command: apply``: each verified branch's :class:`gitops.core.health.Verification`.
    verifications: list[Verification] = field(default_factory=list)
    #: On a change request: each server's url, and what it changes of the credential routes and of the builds
    #: (:func:`gitops.config.routes.route_changes`); ``routes_unknown`` says why they could not be compared with the
    #: base commit's manifest.
    servers: dict[str, str] = field(default_factory=dict)
    route_changes: list[RouteChange] = field(default_factory=list)
    routes_unknown: str = ""
    #: ``command: rehearse``: the :class:`gitops.app.rehearsal.Rehearsal`; ``command: comment``: the result file's.
    rehearsal: Rehearsal | RehearsalResult | None = None
    #: ``command: rehearse``: the result file written for a comment job (output ``rehearsal-file``).
    rehearsal_file: Path | None = None

    def health(self) -> str:
        """The worst first verdict of the verified branches (failing, unknown, healthy); empty when none."""
        statuses = {v.health.status for v in self.verifications}
        return next((status for status in ("failing", "unknown", "healthy") if status in statuses), "")

    def outputs(self) -> dict[str, str]:
        plan = self.plan
        rolled = any(v.action == "restored" for v in self.verifications)
        return {
            "health": self.health(),
            "rolled-back": "" if not self.verifications else str(rolled).lower(),
            "exit-code": str(int(self.exit_code)),
            "has-changes": "" if plan is None else str(bool(plan.has_changes)).lower(),
            "uploads-needed": "" if plan is None else str(plan.uploads_needed),
            "plan-file": "" if self.plan_file is None else str(self.plan_file),
            "comment-url": self.comment_url,
            "drifted": "" if self.drift is None else str(bool(self.drift.has_drift)).lower(),
            "issue-url": self.issue_url,
            "rehearsal": "" if self.rehearsal is None else str(self.rehearsal.result),
            "rehearsal-file": "" if self.rehearsal_file is None else str(self.rehearsal_file),
        }
