"""The one flow of a deploy: plan, apply, verify, and the outcome with its exit code.

``gitops plan``, ``gitops apply`` and the GitHub Action's step run these stages; a second CI front end (GitLab,
say) would add a front end that renders them, not a copy of the flow. The stages never print and choose no words
for a terminal: what a front end shows between them (the plan, a question, each step's outcome) it passes in as
``show``, ``confirm`` and ``progress``. What the stages do decide, once for every front end, is the outcome: the
plan's exit-code rule (:func:`plan_exit_code`) and the apply's (:attr:`Applied.exit_code`,
:attr:`AppliedEach.exit_code`).

The plan stage owns the fast start (:mod:`gitops.app.headstart`): a front end that plans begins it with
:func:`read_ahead` as soon as it has its options, opens the session with :func:`open_session` and hands what it
returns to :func:`make_or_load`; no front end names the head start. So that the local read's child reads while the
rest of the run is imported, importing this module imports only that read: the session is imported by
:func:`open_session` (the boundary "the first request"), the planning (which makes the head start) by the plan
stage (the boundary "the local read's fork"), and the apply use case (with the plan models, the renderers' lines
and the verification) where the apply stages use it: during a fresh plan the local read's worker imports it while
the servers answer
(:data:`gitops.app.planning.AFTER_THE_SERVERS`), so that the first request is not held up by it. For the same
reason the stages' results are plain classes: a dataclass's generated methods are made when the module is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gitops.app.headstart.localread import LocalRead
from gitops.app.headstart.localread import read_ahead as _read_ahead
from gitops.app.options import Options
from gitops.errors import BudgetError, ExitCode, GitopsError, worst

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from gitops.app.applying import ApplyReport
    from gitops.app.session import Session
    from gitops.core.apply import Outcome
    from gitops.core.codeset import CodeSet
    from gitops.core.deploys import UnsettledDeploy
    from gitops.core.health import Verification
    from gitops.core.local import SourceInfo
    from gitops.core.plan import Plan

Progress = Callable[["Outcome"], None]
#: The local read a planning front end began (:func:`read_ahead`): its ``loaded`` manifest opens the session, its
#: ``remember_read()`` records a plan that found the servers holding the code, its ``cancel()`` ends it.
Reading = LocalRead


def read_ahead(options: Options) -> Reading:
    """Begin the plan stage's local read as soon as the manifest is loaded, before the front end imports the rest
    (:func:`gitops.app.headstart.localread.read_ahead`): its child reads the code meanwhile. The front end hands it
    to :func:`make_or_load` and calls its ``cancel()`` when it ends. Raises what loading the manifest raises."""
    return _read_ahead(options)


def plan_exit_code(plan: Plan, refusal: BudgetError | None, *, changes_count: bool = True) -> int:
    """THE plan's exit code: the worst failed server's (or 3 when that is higher and the budget does not fit), else
    3 when the budget does not fit, else 12 when a branch's last deploy is unverified or failing, else 2 for changes
    (``changes_count``: not for a plan about to be applied) and 0 for none."""
    if plan.failure_code is not None:
        return max(plan.failure_code, ExitCode.BUDGET if refusal is not None else 0)
    if refusal is not None:
        return ExitCode.BUDGET
    if plan.unsettled:
        return ExitCode.UNVERIFIED
    return ExitCode.CHANGES if changes_count and plan.has_changes else ExitCode.OK


class Planned:
    """A plan and whether it fits the budget: the outcome of ``gitops plan`` and of the Action's plan."""

    __slots__ = ("plan", "refusal")

    def __init__(self, plan: Plan, refusal: BudgetError | None) -> None:
        self.plan = plan
        #: The budget's refusal (:func:`gitops.app.budgetgates.budget_error`), or ``None`` when the plan fits.
        self.refusal = refusal

    @property
    def exit_code(self) -> int:
        return plan_exit_code(self.plan, self.refusal)


def open_session(options: Options, reading: Reading | None = None) -> AbstractContextManager[Session]:
    """The run's session (:func:`gitops.app.session.open_session`), on the manifest that ``reading`` loaded when the
    front end began one (:func:`read_ahead`): the session is imported here, once the local read is forked, so that
    its child reads while the session's modules (about 45) are imported."""
    from gitops.app.session import open_session as opened  # noqa: PLC0415 (boundary: the first request)

    return opened(options, reading.loaded if reading is not None else None)


def make_or_load(
    session: Session,
    *,
    isolate: bool,
    reading: Reading | None = None,
    plan_file: Path | None = None,
    code: Mapping[tuple[str, str], CodeSet] | None = None,
    source: SourceInfo | None = None,
) -> Plan:
    """The plan stage: a fresh plan (``isolate``: a failed server is marked and the others planned; ``code`` and
    ``source``: code given instead of the repository's, as rollback gives it), or the one ``plan_file`` holds,
    checked against the session's manifest. A fresh plan always has the head start: with the front end's local
    read when it began one (:func:`read_ahead`), else one begun here."""
    if plan_file is None:
        from gitops.app.planning import make_plan  # noqa: PLC0415 (boundary: the local read's fork)

        return make_plan(session, isolate=isolate, code=code, source=source, head_start=True, reading=reading)
    from gitops.app.applying import load_saved_plan  # noqa: PLC0415 (boundary: after the servers)

    return load_saved_plan(plan_file, session)


def weigh(session: Session, plan: Plan) -> Planned:
    """The outcome of a plan that is shown, not applied: whether it fits the budget, and so its exit code."""
    from gitops.app.budgetgates import budget_error  # noqa: PLC0415 (boundary: the local read's fork)

    return Planned(plan, budget_error(plan, session))


class Applied:
    """What an apply did (its report, the branches judged again) and what is still unsettled after it."""

    __slots__ = ("again", "exit_code", "left", "report")

    def __init__(
        self, report: ApplyReport, again: list[Verification], left: list[UnsettledDeploy], exit_code: int
    ) -> None:
        self.report = report
        #: ``--verify-again``: each branch watched and judged again.
        self.again = again
        #: The deploys still unverified or failing that this run did not judge (issue 39).
        self.left = left
        #: The verifications' worst code, or 12 for a branch left unsettled (1 when the person said no).
        self.exit_code = exit_code

    @property
    def verifications(self) -> list[Verification]:
        return [*self.report.verifications, *self.again]


def apply(
    session: Session,
    plan: Plan,
    *,
    saved: bool,
    confirm: Callable[[], bool] | None = None,
    progress: Progress | None = None,
    verify_again: bool = False,
) -> Applied:
    """The apply and verify stages: carry ``plan`` out (asking ``confirm`` first, when given), each branch with
    ``verify:`` watched and judged; with ``verify_again``, the unsettled branches the plan does not change judged
    again. A SIGINT/SIGTERM during a watch finishes the step in flight and is recorded."""
    (report,), _, again, left = _carry_out(
        session, plan, saved=saved, progress=progress, confirm=confirm, verify_again=verify_again
    )
    if report.cancelled:
        # The person answered no: nothing was applied (an error for scripts that expected a deploy).
        return Applied(report, again, left, ExitCode.FAILURE)
    # The verifications' worst code, or 12 for a branch left unsettled: the most serious wins (as AppliedEach ranks).
    judged = [v.exit_code for v in [*report.verifications, *again]]
    return Applied(report, again, left, worst([*judged, *(ExitCode.UNVERIFIED for _ in left)]))


class AppliedEach:
    """``apply --keep-going``: each server applied on its own; the failed ones and what is still unsettled."""

    __slots__ = ("cancelled", "failures", "left", "plan", "reports")

    def __init__(
        self,
        plan: Plan,
        reports: list[ApplyReport] | None = None,
        failures: dict[str, GitopsError] | None = None,
        left: list[UnsettledDeploy] | None = None,
        *,
        cancelled: bool = False,
    ) -> None:
        self.plan = plan
        self.reports = reports or []
        #: The error of each server whose apply failed.
        self.failures = failures or {}
        #: The deploys still unverified or failing that this run did not judge (issue 39).
        self.left = left or []
        self.cancelled = cancelled

    @property
    def exit_code(self) -> int:
        """The worst failure's (planning or applying) or verification's code; 12 for a branch left unsettled; 1 when
        the person said no; 0 when none failed."""
        if self.cancelled:
            return ExitCode.FAILURE
        # The verifications rank by seriousness (11 above 12, as :class:`Applied` ranks them); failures by code.
        verified = worst([*(ExitCode.UNVERIFIED for _ in self.left), *(r.verify_exit_code for r in self.reports)])
        failed = [failure.exit_code for failure in self.plan.failed]
        failed += [exc.exit_code for exc in self.failures.values()]
        return max([verified, *failed])


def apply_each(
    session: Session,
    plan: Plan,
    *,
    saved: bool,
    confirm: Callable[[], bool] | None = None,
    progress: Progress | None = None,
) -> AppliedEach:
    """The apply and verify stages server by server (``--keep-going``): a server that fails is recorded and the
    others go on. ``confirm`` is asked once for the whole plan, when it has changes."""
    if confirm is not None and plan.has_changes and not confirm():
        return AppliedEach(plan, cancelled=True)
    reports, failures, _, left = _carry_out(session, plan, saved=saved, progress=progress, each=True)
    return AppliedEach(plan, reports, failures, left)


def _carry_out(
    session: Session,
    plan: Plan,
    *,
    saved: bool,
    progress: Progress | None,
    confirm: Callable[[], bool] | None = None,
    verify_again: bool = False,
    each: bool = False,
) -> tuple[list[ApplyReport], dict[str, GitopsError], list[Verification], list[UnsettledDeploy]]:
    """What both apply stages do, with the apply use case (imported here, once the servers have answered): carry
    ``plan`` out at once (one report; interrupts installed; with ``verify_again``, the unsettled branches judged
    again) or server by server (``each``: a report per server applied, an error per server failed); then the
    deploys still unsettled that this run did not judge."""
    from gitops.app import applying, deploys  # noqa: PLC0415 (boundary: after the servers)

    failures: dict[str, GitopsError] = {}
    again: list[Verification] = []
    if each:
        reports, failures = applying.apply_each(session, plan, saved=saved, progress=progress)
    else:
        with session.options.interrupt.installed():
            report = applying.run_apply(session, plan, saved=saved, confirm=confirm, progress=progress)
            again = applying.verify_again_each(session, plan) if verify_again and not report.cancelled else []
        reports = [report]
    judged = {v.label for r in reports for v in r.verifications} | {v.label for v in again}
    left = [note for note in deploys.unsettled(session) if note.label not in judged]
    return reports, failures, again, left
