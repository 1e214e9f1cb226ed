"""What ``gitops plan`` shows once the plan is made (``gitops.cli.planshow``): the plan in each format, a failed
server's error, the budget's refusal and the saved plan file. The whole command against a stand-in is
``tests/cli/test_plan.py``'s."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gitops.app.pipeline import Planned
from gitops.cli.planshow import report, show
from gitops.core.plan import Plan, ServerFailure
from gitops.edges.planfile import load_plan
from gitops.errors import BudgetError
from tests.core.factories import local, manifest, on_server, plan, view

MAIN = {"main": "module.exports.loop = function () {};\n"}


@pytest.fixture
def made() -> Plan:
    return plan(manifest(), local(("local", "main", MAIN)), view("local", on_server("main", None)))


def _failed(made: Plan) -> Plan:
    failure = ServerFailure(server="other", branches=["main"], message="server 'other' did not answer", exit_code=6)
    return dataclasses.replace(made, failed=[failure])


def test_the_plan_is_shown_in_the_chosen_format(made: Plan, capsys: pytest.CaptureFixture[str]) -> None:
    show(made, "text", now=0.0, color=False, full=False)
    assert "local/main" in capsys.readouterr().out
    show(made, "json", now=0.0, color=False, full=False)
    assert json.loads(capsys.readouterr().out)["format_version"] == 1
    show(made, "markdown", now=0.0, color=False, full=False)
    assert "local/main" in capsys.readouterr().out


def test_a_failed_servers_error_goes_to_stderr(made: Plan, capsys: pytest.CaptureFixture[str]) -> None:
    show(_failed(made), "text", now=0.0, color=False, full=False)
    assert capsys.readouterr().err == "Error: server 'other' did not answer\n"


def test_a_refusal_is_raised_unless_a_server_failed(made: Plan, capsys: pytest.CaptureFixture[str]) -> None:
    refusal = BudgetError("the plan does not fit the token's rate limits; nothing was sent")
    with pytest.raises(BudgetError):
        report(Planned(made, refusal), None)
    report(Planned(_failed(made), refusal), None)  # the failed server's code is the run's: the refusal is said
    assert "Error: the plan does not fit" in capsys.readouterr().err


def test_the_plan_is_saved_when_it_fits(made: Plan, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.json"
    report(Planned(made, None), out)
    assert load_plan(out) == made
    assert f"Plan saved to {out}" in capsys.readouterr().err
