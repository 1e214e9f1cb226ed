"""What a CI run found out (:mod:`gitops.app.ci.report`): the outputs every host writes, and the worst health."""

from __future__ import annotations

from pathlib import Path

from gitops.app.ci.report import Report
from gitops.errors import ExitCode


def test_a_run_that_planned_nothing_has_empty_outputs_but_its_exit_code() -> None:
    outputs = Report(command="plan", manifest="gitops.yaml", exit_code=ExitCode.BUDGET).outputs()
    assert outputs["exit-code"] == "3"
    assert {name for name, value in outputs.items() if value} == {"exit-code"}
    assert list(outputs) == [
        "health",
        "rolled-back",
        "exit-code",
        "has-changes",
        "uploads-needed",
        "plan-file",
        "comment-url",
        "drifted",
        "issue-url",
        "rehearsal",
        "rehearsal-file",
    ]


def test_the_plan_file_and_the_comment_are_named_in_the_outputs(tmp_path: Path) -> None:
    report = Report(command="plan", manifest="gitops.yaml", plan_file=tmp_path / "p.json", comment_url="https://x")
    assert report.outputs()["plan-file"] == str(tmp_path / "p.json")
    assert report.outputs()["comment-url"] == "https://x"
    assert report.health() == ""
