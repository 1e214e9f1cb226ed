"""The plan's builder (``gitops/app/planbuilder.py``): the plan made once the servers have answered, its drift
findings kept in the ledger, the compression probe it needs, and the refusals it makes before anything is sent."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from gitops.app.planbuilder import probe_needs
from gitops.app.planning import make_plan
from gitops.app.session import open_session
from gitops.core.endpoints import ACTIVATE
from gitops.errors import ScopeError
from gitops.standin.testing import FULL_TOKEN, RESTRICTED_TOKEN, StandIn
from tests.app.planningkit import one_server


def test_code_the_server_holds_already_is_recorded_as_applied_and_verified(tmp_path: Path, standin: StandIn) -> None:
    options = one_server(tmp_path, standin.url)
    modules = {"main": (tmp_path / "src" / "main.js").read_text(encoding="utf-8")}
    with httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}) as http:
        assert http.post("/api/user/clone-branch", json={"branch": "default", "newName": "main"}).status_code == 200
        assert http.post("/api/user/code", json={"branch": "main", "modules": modules}).status_code == 200
    with open_session(options) as session:
        plan = make_plan(session)
        applied = session.ledger("s").applied("main")
    assert not plan.has_changes
    assert applied is not None
    assert applied.how == "verified"  # what the server holds is what Git holds: nothing was lost outside Git
    (branch,) = plan.branches
    assert branch.drift is not None


def test_no_compression_probe_is_budgeted_for_a_server_known_to_read_deflate(tmp_path: Path, standin: StandIn) -> None:
    with open_session(one_server(tmp_path, standin.url)) as session:
        plan = make_plan(session)
        # The stand-in's answers say Accept-Encoding: deflate, and the ledger keeps what they said.
        assert session.compression("s") == "on"
        assert plan.has_changes
        assert probe_needs(plan, session) == {}
    assert not any("whether the server reads compressed uploads" in w for w in plan.warnings)
    assert [r for r in plan.budget if r.endpoint == ACTIVATE] == []  # no activation, and no probe, to budget


def test_a_plan_the_token_may_not_apply_is_refused_before_anything_is_sent(tmp_path: Path, standin: StandIn) -> None:
    with (
        open_session(one_server(tmp_path, standin.url, token=RESTRICTED_TOKEN)) as session,
        pytest.raises(ScopeError, match=r"may not use POST /api/user/clone-branch"),
    ):
        make_plan(session)
    assert standin.count("POST /api/user/clone-branch") == 0
    assert standin.count("POST /api/user/code") == 0
