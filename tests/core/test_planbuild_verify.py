"""``build_plan`` with ``verify:``: the step, the reserved rollback in the budget, what cannot be undone, and the
blue/green choice of branch. Pure: values from ``tests.core.factories``."""

from __future__ import annotations

from typing import Any

from gitops.core.endpoints import ACTIVATE, UPLOAD
from gitops.core.health import VerifyOverrides
from gitops.core.plan import Plan as PlanModel
from gitops.core.plan import requests_needed
from gitops.core.planbuild import build_plan
from gitops.core.planseal import seal_problems
from tests.core.factories import NOW, branch, facts, listed, local, manifest, on_server, plan, view, window

OLD = {"main": "old\n"}
NEW = {"main": "new\n"}


def _verified(**verify: Any) -> Any:
    return manifest(branch(activate=["world"], verify={"ticks": 5, "on_failure": "rollback", **verify}))


def test_restore_reserves_one_upload_and_holds_the_previous_code() -> None:
    server = on_server("main", OLD)
    result = plan(
        _verified(), local(("local", "main", NEW)), view("local", server, listed=listed("main", world="main"))
    )
    (b,) = result.branches
    assert b.verify is not None
    assert b.verify.reserves_upload
    assert requests_needed(result.branches)[UPLOAD] == 2
    rollback = result.rollback("local", "main")
    assert rollback is not None
    assert rollback.modules == OLD
    assert seal_problems(result) == []


def test_a_reserve_that_does_not_fit_makes_the_row_not_fit() -> None:
    loaded = _verified()
    result = plan(
        loaded,
        local(("local", "main", NEW)),
        view("local", on_server("main", OLD), listed=listed("main", world="main")),
        budgets={"local": facts(window(UPLOAD, 240, 1))},
    )
    row = next(r for r in result.budget if r.endpoint == UPLOAD)
    assert (row.needed, row.for_rollback, row.fits) == (2, 1, False)
    assert not result.fits_budget


def test_without_the_previous_code_the_failure_is_only_reported() -> None:
    ledger_only = on_server("main", OLD, how="ledger", with_text=False)
    result = plan(_verified(), local(("local", "main", NEW)), view("local", ledger_only))
    (b,) = result.branches
    assert b.verify is not None
    assert not b.verify.reserves_upload
    assert "--refresh=always" in (b.verify.note or "")
    assert requests_needed(result.branches).get(UPLOAD) == 1
    assert result.rollbacks == []
    assert any("cannot be done" in w for w in result.warnings)


def test_no_verify_and_overrides() -> None:
    loaded = _verified()
    code = local(("local", "main", NEW))
    views = {"local": view("local", on_server("main", OLD))}
    off = build_plan(
        loaded=loaded, local=code, remote=views, budgets={}, refresh="always", now=NOW, verify=VerifyOverrides(False)
    )
    assert off.branches[0].verify is None
    assert off.rollbacks == []
    tuned = build_plan(
        loaded=loaded,
        local=code,
        remote=views,
        budgets={},
        refresh="always",
        now=NOW,
        verify=VerifyOverrides(True, 7, 9.5),
    )
    step = tuned.branches[0].verify
    assert step is not None
    assert (step.ticks, step.timeout) == (7, 9.5)


def test_unchanged_branch_is_not_verified() -> None:
    result = plan(
        _verified(),
        local(("local", "main", OLD)),
        view("local", on_server("main", OLD), listed=listed("main", world="main")),
    )
    assert result.branches[0].verify is None


def test_blue_green_deploys_to_the_inactive_one_and_reserves_the_switch_back() -> None:
    loaded = _verified(rollback="standby", standby="main-b")
    servers = view(
        "local",
        on_server("main", OLD),
        on_server("main-b", {"main": "older\n"}),
        listed=listed("main", "main-b", world="main"),
    )
    result = plan(loaded, local(("local", "main", NEW)), servers)
    (b,) = result.branches
    assert b.branch == "main-b"
    assert [s.kind for s in b.steps] == ["upload", "activate"]
    assert b.verify is not None
    assert (b.verify.switch_back, b.verify.switch_for, b.verify.pair_of) == ("main", ["world"], "main")
    needs = requests_needed(result.branches)
    assert (needs[UPLOAD], needs[ACTIVATE]) == (1, 2)
    assert result.rollbacks == []


def test_blue_green_does_nothing_when_the_active_one_holds_the_code() -> None:
    loaded = _verified(rollback="standby", standby="main-b")
    servers = view(
        "local", on_server("main", OLD), on_server("main-b", NEW), listed=listed("main", "main-b", world="main-b")
    )
    result: PlanModel = plan(loaded, local(("local", "main", NEW)), servers)
    (b,) = result.branches
    assert (b.branch, b.action, b.verify) == ("main-b", "none", None)


def test_blue_green_without_an_active_one_has_nothing_to_switch_back_to() -> None:
    loaded = _verified(rollback="standby", standby="main-b")
    servers = view(
        "local", on_server("main", None), on_server("main-b", None), listed=listed("default", world="default")
    )
    (b,) = plan(loaded, local(("local", "main", NEW)), servers).branches
    assert b.branch == "main"
    assert b.verify is not None
    assert b.verify.switch_back is None
    assert "nothing to switch back to" in (b.verify.note or "")
