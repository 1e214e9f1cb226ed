"""A plan with a failed server, in the three renderers (issue 14: the others complete, the failed one marked)."""

from __future__ import annotations

import dataclasses
import json

from gitops.core.plan import Plan, ServerFailure
from gitops.render.plan import render_json, render_markdown, render_text, summary_line
from tests.core.factories import NOW, local, manifest, plan


def failed_plan(*, changes: bool = True) -> Plan:
    p = plan(manifest(), local(("local", "main", {"main": "m"})))
    if not changes:
        p = dataclasses.replace(p, branches=[])
    failure = ServerFailure(server="away", branches=["main"], message="cannot reach http://127.0.0.1:1", exit_code=1)
    return dataclasses.replace(p, failed=[failure])


def test_text_marks_the_failed_server() -> None:
    text = render_text(failed_plan(), now=NOW)
    assert "away: FAILED (exit 1), not planned" in text
    assert "  branches: main" in text
    assert "  cannot reach http://127.0.0.1:1" in text
    assert "local/main: create" in text
    assert text.rstrip().endswith("1 server(s) failed: away.")


def test_summary_without_changes_still_names_the_failed_server() -> None:
    assert (
        summary_line(failed_plan(changes=False), now=NOW)
        == "No changes on the servers that answered. 1 server(s) failed: away."
    )


def test_json_lists_the_failure() -> None:
    doc = json.loads(render_json(failed_plan(), now=NOW))
    assert doc["failed"] == [
        {"server": "away", "branches": ["main"], "error": "cannot reach http://127.0.0.1:1", "exit_code": 1}
    ]
    assert [b["server"] for b in doc["branches"]] == ["local"]


def test_markdown_lists_the_failure_inertly() -> None:
    p = failed_plan()
    evil = dataclasses.replace(p.failed[0], message="<details> @someone `x`")
    text = render_markdown(dataclasses.replace(p, failed=[evil]), now=NOW)
    assert "**Failed servers** (not planned)" in text
    assert "- `away` (exit 1; branches `main`): " in text
    assert "<details> @someone" not in text
    assert failed_plan().failure_code == 1
