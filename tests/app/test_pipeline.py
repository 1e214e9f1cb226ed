"""The pipeline's exit codes (``gitops/app/pipeline.py``), one table: each row an outcome and the code the README's
table gives it. ``plan_exit_code``, ``Planned.exit_code``, ``Applied.exit_code`` and ``AppliedEach.exit_code``
decide them once for every front end.

The rows a stand-in can produce run the real stages against it on a loopback port (a real plan, a real apply, a real
budget, a server that refuses or does not answer, a deploy the ledger records as unverified); the verification
outcomes (9, 10, 11, an interrupted watch) need a game that ticks, so their rows give the stages' result classes real
values of the core (``Verification``, ``UnsettledDeploy``) and a real plan made against the stand-in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitops.app import pipeline
from gitops.app.applying import ApplyReport
from gitops.app.session import open_session
from gitops.core.deploys import UnsettledDeploy, VerifyRecord
from gitops.core.health import Health, Verification
from gitops.core.plan import Plan, ServerFailure
from gitops.errors import AuthError, BudgetError, ExitCode, GitopsError
from gitops.standin.testing import ALICE, StandIn
from tests.app.stages import OTHER_TOKEN, Bot
from tests.loopback import closed_port

UPLOAD = "POST /api/user/code"


@pytest.fixture
def bot(tmp_path: Path, standin: StandIn) -> Bot:
    return Bot(tmp_path / "bot", standin)


def _other_server(bot: Bot, url: str, variable: str = "SCREEPS_TOKEN") -> None:
    bot.servers({"local": bot.standin.url, "other": url}, {"other": variable})


# --- through the real stages, against the stand-in -----------------------------------------------------------------


def _plan_has_changes(bot: Bot) -> int:
    return bot.planned().exit_code


def _plan_no_changes(bot: Bot) -> int:
    assert bot.applied().exit_code == ExitCode.OK
    return bot.planned().exit_code


def _plan_about_to_be_applied(bot: Bot) -> int:
    with open_session(bot.options) as session:
        plan = pipeline.make_or_load(session, isolate=False)
        assert plan.has_changes
        return pipeline.plan_exit_code(plan, pipeline.weigh(session, plan).refusal, changes_count=False)


def _plan_over_budget(bot: Bot) -> int:
    bot.servers({"local": bot.standin.url}, budget={"reserve": {UPLOAD: 239}})
    assert bot.applied().exit_code == ExitCode.OK  # creates the branch holding its modules: no upload
    bot.write("module.exports.loop = () => 'v1';\n")
    assert bot.applied().exit_code == ExitCode.OK  # the day's first upload: 239 left, all reserved for the person
    assert bot.standin.count(UPLOAD) == 1
    bot.write("module.exports.loop = () => 'v2';\n")
    planned = bot.planned()
    assert planned.refusal is not None
    return planned.exit_code


def _plan_a_server_unreachable(bot: Bot) -> int:
    _other_server(bot, f"http://127.0.0.1:{closed_port()}")
    planned = bot.planned()
    assert [f.server for f in planned.plan.failed] == ["other"]
    assert [b.server for b in planned.plan.branches] == ["local"]  # the other server was still planned
    return planned.exit_code


def _plan_a_token_refused(bot: Bot) -> int:
    _other_server(bot, bot.standin.url, variable=OTHER_TOKEN)
    return bot.planned().exit_code


def _apply_done(bot: Bot) -> int:
    applied = bot.applied()
    assert applied.report.applied
    assert bot.standin.branch_modules(ALICE, "main") == {"main": "module.exports.loop = () => {};\n"}
    return applied.exit_code


def _apply_answered_no(bot: Bot) -> int:
    applied = bot.applied(confirm=lambda: False)
    assert applied.report.cancelled
    assert bot.standin.branch_modules(ALICE, "main") is None  # nothing was sent
    return applied.exit_code


def _apply_each_done(bot: Bot) -> int:
    return bot.applied_each().exit_code


def _apply_each_answered_no(bot: Bot) -> int:
    applied = bot.applied_each(confirm=lambda: False)
    assert applied.cancelled
    assert bot.standin.branch_modules(ALICE, "main") is None
    return applied.exit_code


def _apply_each_a_token_refused(bot: Bot) -> int:
    _other_server(bot, bot.standin.url, variable=OTHER_TOKEN)
    applied = bot.applied_each()
    assert len(applied.reports) == 1  # the server that answered was applied
    assert bot.standin.branch_modules(ALICE, "main") is not None
    return applied.exit_code


def _left_unverified(bot: Bot) -> None:
    """The branch deployed, and its watch never ended (a run killed mid-watch), as the ledger records it."""
    assert bot.applied().exit_code == ExitCode.OK
    with open_session(bot.options) as session:
        now = bot.standin.clock.now()
        record = VerifyRecord("main", "pending", None, None, now, now, reason="the run was killed during its watch")
        session.ledger("local").record_verification(record)
        session.save("local")


def _plan_a_branch_left_unverified(bot: Bot) -> int:
    _left_unverified(bot)
    planned = bot.planned()
    assert not planned.plan.has_changes
    assert [u.label for u in planned.plan.unsettled] == ["local/main"]
    return planned.exit_code


def _apply_with_a_branch_left_unverified(bot: Bot) -> int:
    _left_unverified(bot)
    applied = bot.applied()
    assert [u.label for u in applied.left] == ["local/main"]
    return applied.exit_code


def _apply_each_with_a_branch_left_unverified(bot: Bot) -> int:
    _left_unverified(bot)
    return bot.applied_each().exit_code


STAGES: list[tuple[str, Callable[[Bot], int], int]] = [
    ("plan: changes to apply", _plan_has_changes, ExitCode.CHANGES),
    ("plan: nothing to apply", _plan_no_changes, ExitCode.OK),
    ("plan about to be applied: its changes are no error", _plan_about_to_be_applied, ExitCode.OK),
    ("plan: does not fit the budget", _plan_over_budget, ExitCode.BUDGET),
    ("plan: one server does not answer", _plan_a_server_unreachable, ExitCode.FAILURE),
    ("plan: one server refuses the token", _plan_a_token_refused, ExitCode.CREDENTIALS),
    ("apply: done", _apply_done, ExitCode.OK),
    ("apply: the person answered no", _apply_answered_no, ExitCode.FAILURE),
    ("apply --keep-going: done", _apply_each_done, ExitCode.OK),
    ("apply --keep-going: the person answered no", _apply_each_answered_no, ExitCode.FAILURE),
    ("apply --keep-going: one server refuses the token", _apply_each_a_token_refused, ExitCode.CREDENTIALS),
    ("plan: a branch's last deploy left unverified", _plan_a_branch_left_unverified, ExitCode.UNVERIFIED),
    ("apply: a branch left unverified, not judged now", _apply_with_a_branch_left_unverified, ExitCode.UNVERIFIED),
    ("apply --keep-going: a branch left unverified", _apply_each_with_a_branch_left_unverified, ExitCode.UNVERIFIED),
]


@pytest.mark.parametrize(("outcome", "run", "code"), STAGES, ids=[row[0] for row in STAGES])
def test_the_stages_exit_codes(outcome: str, run: Callable[[Bot], int], code: int, bot: Bot) -> None:
    assert run(bot) == code, outcome


# --- on values: the outcomes that need a game that ticks ------------------------------------------------------------


@pytest.fixture
def plan(bot: Bot) -> Plan:
    """A real plan of the stand-in with a change to apply."""
    with open_session(bot.options) as session:
        made = pipeline.make_or_load(session, isolate=False)
    assert made.has_changes
    assert not made.failed
    assert not made.unsettled
    return made


def _unsettled(branch: str = "main") -> UnsettledDeploy:
    return UnsettledDeploy(
        server="local", branch=branch, state="pending", reason="the watch was interrupted", commit=None, applied_at=0.0
    )


def _failed(code: int) -> ServerFailure:
    return ServerFailure(server="other", branches=["main"], message="it failed", exit_code=code)


def _refusal() -> BudgetError:
    return BudgetError("the plan does not fit the token's rate limits; nothing was sent")


#: Each verification outcome of docs/safe-deploys.md's table.
VERIFIED: dict[str, Verification] = {
    "healthy": Verification("local/main", Health("healthy", "no errors")),
    "unknown": Verification("local/main", Health("unknown", "too few ticks")),
    "unhealthy, left in place": Verification("local/main", Health("failing", "uncaught errors")),
    "rolled back, healthy after": Verification(
        "local/main", Health("failing", "errors"), action="restored", after=Health("healthy", "no errors")
    ),
    "rolled back, not healthy after": Verification(
        "local/main", Health("failing", "errors"), action="restored", after=Health("failing", "errors")
    ),
    "rollback failed": Verification("local/main", Health("failing", "errors"), action="undo-failed"),
    "watch interrupted": Verification("local/main", Health("unknown", "interrupted"), interrupted=True),
}

PLAN_ROWS: list[tuple[str, dict[str, Any], BudgetError | None, bool, int]] = [
    ("changes", {}, None, True, ExitCode.CHANGES),
    ("changes, about to be applied", {}, None, False, ExitCode.OK),
    ("over budget", {}, _refusal(), True, ExitCode.BUDGET),
    ("a branch unsettled", {"unsettled": [_unsettled()]}, None, True, ExitCode.UNVERIFIED),
    ("over budget and a branch unsettled", {"unsettled": [_unsettled()]}, _refusal(), True, ExitCode.BUDGET),
    ("a server failed", {"failed": [_failed(ExitCode.FAILURE)]}, None, True, ExitCode.FAILURE),
    ("a server failed, over budget", {"failed": [_failed(ExitCode.FAILURE)]}, _refusal(), True, ExitCode.BUDGET),
    ("credentials refused, over budget", {"failed": [_failed(ExitCode.CREDENTIALS)]}, _refusal(), True, 7),
    ("the worst failed server's", {"failed": [_failed(7), _failed(ExitCode.FAILURE)]}, None, True, 7),
    ("a failed server before unsettled", {"failed": [_failed(1)], "unsettled": [_unsettled()]}, None, True, 1),
]


@pytest.mark.parametrize(("outcome", "change", "refusal", "counts", "code"), PLAN_ROWS, ids=[r[0] for r in PLAN_ROWS])
def test_the_plans_exit_code(
    outcome: str, change: dict[str, Any], refusal: BudgetError | None, counts: bool, code: int, plan: Plan
) -> None:
    changed = dataclasses.replace(plan, **change)
    assert pipeline.plan_exit_code(changed, refusal, changes_count=counts) == code, outcome
    if counts:
        assert pipeline.Planned(changed, refusal).exit_code == code


APPLIED_ROWS: list[tuple[str, list[str], int]] = [
    ("nothing verified", [], ExitCode.OK),
    *[
        (name, [name], code)
        for name, code in [
            ("healthy", ExitCode.OK),
            ("unknown", ExitCode.OK),
            ("unhealthy, left in place", ExitCode.UNHEALTHY),
            ("rolled back, healthy after", ExitCode.ROLLED_BACK),
            ("rolled back, not healthy after", ExitCode.UNHEALTHY),
            ("rollback failed", ExitCode.UNDO_FAILED),
            ("watch interrupted", ExitCode.UNVERIFIED),
        ]
    ],
    # The most serious code of a run wins: 11, then 12, then 9, then 10 (docs/safe-deploys.md).
    ("rolled back and unhealthy", ["rolled back, healthy after", "unhealthy, left in place"], ExitCode.UNHEALTHY),
    ("unhealthy and interrupted", ["unhealthy, left in place", "watch interrupted"], ExitCode.UNVERIFIED),
    ("interrupted and rollback failed", ["watch interrupted", "rollback failed"], ExitCode.UNDO_FAILED),
]


def _report(plan: Plan, names: list[str]) -> ApplyReport:
    return ApplyReport(plan, applied=True, verifications=[VERIFIED[name] for name in names])


@pytest.mark.parametrize(("outcome", "names", "code"), APPLIED_ROWS, ids=[r[0] for r in APPLIED_ROWS])
def test_an_applys_exit_code_is_its_most_serious_verification(
    outcome: str, names: list[str], code: int, plan: Plan
) -> None:
    assert _report(plan, names).verify_exit_code == code, outcome
    assert pipeline.AppliedEach(plan, [_report(plan, names)]).exit_code == code, outcome


def test_apply_keep_going_takes_a_failed_servers_code(plan: Plan) -> None:
    failures: dict[str, GitopsError] = {"other": AuthError("the server refused the token")}
    assert pipeline.AppliedEach(plan, [_report(plan, ["healthy"])], failures).exit_code == ExitCode.CREDENTIALS
    failed_plan = dataclasses.replace(plan, failed=[_failed(ExitCode.FAILURE)])
    assert pipeline.AppliedEach(failed_plan, [_report(plan, [])]).exit_code == ExitCode.FAILURE
    assert pipeline.AppliedEach(plan, [_report(plan, [])], left=[_unsettled("other")]).exit_code == 12
    assert pipeline.AppliedEach(plan, [_report(plan, ["unhealthy, left in place"])], failures).exit_code == 9


def test_apply_keep_going_answered_no_is_1_whatever_else(plan: Plan) -> None:
    applied = pipeline.AppliedEach(plan, [_report(plan, ["rollback failed"])], left=[_unsettled()], cancelled=True)
    assert applied.exit_code == ExitCode.FAILURE


def test_apply_keep_going_ranks_a_failed_rollback_above_an_unsettled_branch(plan: Plan) -> None:
    applied = pipeline.AppliedEach(plan, [_report(plan, ["rollback failed"])], left=[_unsettled("other")])
    assert applied.exit_code == ExitCode.UNDO_FAILED


def test_applied_carries_the_code_it_was_given_and_lists_every_verification(plan: Plan) -> None:
    report = _report(plan, ["healthy"])
    again = [VERIFIED["watch interrupted"]]
    applied = pipeline.Applied(report, again, [], ExitCode.UNVERIFIED)
    assert applied.exit_code == ExitCode.UNVERIFIED
    assert applied.verifications == [VERIFIED["healthy"], VERIFIED["watch interrupted"]]
