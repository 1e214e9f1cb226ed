"""What ``gitops apply`` shows once the plan is made (``gitops.cli.applyshow``): the console, the ``--json``
document, the end of the run and ``--keep-going``'s summary. The whole command against a stand-in is
``tests/cli/test_apply.py``'s."""

from __future__ import annotations

import json

import pytest

from gitops.app.applying import ApplyReport
from gitops.app.pipeline import Applied, AppliedEach
from gitops.cli.applyshow import print_document, show_each, show_ended, text_console
from gitops.core.plan import Plan
from gitops.errors import AuthError, ExitCode
from tests.core.factories import local, manifest, on_server, plan, view

MAIN = {"main": "module.exports.loop = function () {};\n"}


@pytest.fixture
def made() -> Plan:
    return plan(manifest(), local(("local", "main", MAIN)), view("local", on_server("main", None)))


def test_with_json_the_persons_text_goes_to_stderr(made: Plan, capsys: pytest.CaptureFixture[str]) -> None:
    text_console(True, color=False, full=False).plan(made, now=0.0)
    out, err = capsys.readouterr()
    assert out == ""
    assert "local/main" in err
    text_console(False, color=False, full=False).plan(made, now=0.0)
    assert "local/main" in capsys.readouterr().out


def test_the_json_document_holds_the_plan_and_what_was_applied(made: Plan, capsys: pytest.CaptureFixture[str]) -> None:
    applied = Applied(ApplyReport(made, applied=True), [], [], ExitCode.OK)
    print_document(made, [], applied, now=0.0)
    document = json.loads(capsys.readouterr().out)
    assert document["format_version"] == 1
    assert document["applied"] is True
    assert document["plan"]["format_version"] == 1
    assert (document["outcomes"], document["verify"], document["unsettled"]) == ([], [], [])


def test_the_end_of_the_run_says_what_was_applied(made: Plan, capsys: pytest.CaptureFixture[str]) -> None:
    console = text_console(False, color=False, full=False)
    show_ended(console, Applied(ApplyReport(made, applied=True), [], [], ExitCode.OK), told=True)
    assert "Applied" in capsys.readouterr().out


def test_keep_going_lists_each_failed_server_and_keeps_its_code(made: Plan, capsys: pytest.CaptureFixture[str]) -> None:
    each = AppliedEach(made, [], {"local": AuthError("the token was refused")})
    assert show_each(each) == ExitCode.CREDENTIALS
    assert "Error: server 'local' failed: the token was refused" in capsys.readouterr().err
    assert show_each(AppliedEach(made, cancelled=True)) == ExitCode.FAILURE
