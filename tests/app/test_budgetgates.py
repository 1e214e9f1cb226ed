"""The budget gates (``gitops/app/budgetgates.py``): whether requests fit what remains of the token's limits, and
whether the token may use the endpoints a plan needs; each refusal made before anything is sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.app.budgetgates import budget_error, check_download_budget, recheck_budget, scope_error
from gitops.app.planning import make_plan
from gitops.app.session import open_session
from gitops.errors import BudgetError
from gitops.standin.testing import RESTRICTED_TOKEN, StandIn
from tests.app.planningkit import one_server


def test_a_plan_that_fits_passes_both_budget_gates(tmp_path: Path, standin: StandIn) -> None:
    with open_session(one_server(tmp_path, standin.url)) as session:
        plan = make_plan(session)
        assert plan.has_changes
        assert budget_error(plan, session) is None
        recheck_budget(plan, session)  # the ledger as it is now: still fits
        recheck_budget(plan, session, {"s": {"GET /api/user/code": 1}})


def test_downloads_beyond_the_hours_limit_are_refused_before_any_is_sent(tmp_path: Path, standin: StandIn) -> None:
    with open_session(one_server(tmp_path, standin.url)) as session:
        check_download_budget(session, "s", 0)  # nothing to download: nothing asked
        with pytest.raises(BudgetError, match=r"^the pull needs more downloads than remain; no download was sent:"):
            check_download_budget(session, "s", 61, doing="the pull", instead="Wait")  # 60 an hour
    assert standin.count("GET /api/user/code") == 0


def test_a_token_restricted_to_the_code_endpoints_may_not_apply_a_new_branch(tmp_path: Path, standin: StandIn) -> None:
    with open_session(one_server(tmp_path, standin.url, state="full")) as session:
        plan = make_plan(session)  # a new branch: cloned, then uploaded
    with open_session(one_server(tmp_path, standin.url, token=RESTRICTED_TOKEN, state="restricted")) as session:
        refusal = scope_error(plan, session)
    assert refusal is not None
    assert refusal.message == (
        "server 's': the token may not use POST /api/user/clone-branch, which applying this plan needs "
        "(s/main: POST /api/user/clone-branch); nothing was sent"
    )
    assert refusal.exit_code == 7
