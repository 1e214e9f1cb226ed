"""The drift report's renderers: every status in text, the versioned JSON, and Markdown that keeps hostile module
and branch names inert (parsed with markdown-it-py, as the plan's Markdown is)."""

from __future__ import annotations

import json

from gitops.core.drift import BranchDrift, DriftReport
from gitops.core.driftfinding import Drift
from gitops.render.drift import render_json, render_markdown, render_text
from tests.core.factories import NOW
from tests.render.test_markdown_inert import HOSTILE, parse

REPORT = DriftReport(
    (
        BranchDrift(
            "local",
            "main",
            Drift(status="drifted", changed=["main"], added=["hack"], applied_at=NOW - 7200, commit="a" * 40),
        ),
        BranchDrift("local", "gone", Drift(status="drifted", removed=["main"], missing=True, applied_at=NOW - 60)),
        BranchDrift("local", "sim", Drift(status="none", applied_at=NOW - 60, applied_how="verified")),
        BranchDrift("local", "lost", Drift(status="none", applied_at=NOW - 60, pending_landed=True)),
        BranchDrift("local", "new", Drift(status="no-record")),
        BranchDrift("local", "odd", Drift(status="unknown", applied_at=NOW)),
    ),
    NOW,
    ("the ledger at /x was corrupt",),
)


def test_text_names_each_status() -> None:
    assert render_text(REPORT).splitlines() == [
        "warning: the ledger at /x was corrupt",
        "local/main: DRIFTED: changed outside Git since this tool applied it 2.0 h ago (commit aaaaaaaaaaaa): "
        "~ main, + hack",
        "local/gone: DRIFTED: changed outside Git since this tool applied it 60 s ago: the branch was deleted",
        "local/sim: no drift: the server holds what this tool applied 60 s ago",
        "local/lost: no drift: the server holds what this tool applied 60 s ago (an upload whose answer was lost had "
        "landed)",
        "local/new: no record: this tool never applied this branch here, so there is nothing to compare with (not "
        "drift)",
        "local/odd: unknown: the server's code could not be read",
        "",
        "Drift: 2 of 6 branch(es) changed outside Git.",
    ]


def test_json_is_versioned_and_complete() -> None:
    document = json.loads(render_json(REPORT))
    assert document["format_version"] == 1
    assert document["drifted"] is True
    assert document["checked_at"] == NOW
    assert [b["drift"] for b in document["branches"]] == [True, True, False, False, None, None]
    assert document["branches"][1]["changed_outside_git"]["branch_deleted"] is True
    assert document["branches"][2]["last_applied"] == {
        "at": NOW - 60,
        "age_seconds": 60,
        "how": "verified",
        "commit": None,
    }
    assert document["warnings"] == ["the ledger at /x was corrupt"]
    quiet = json.loads(render_json(DriftReport((REPORT.branches[2],), NOW)))
    assert quiet["drifted"] is False


def test_markdown_table_and_lines() -> None:
    text = render_markdown(REPORT)
    assert text.startswith("### screeps-gitops drift\n\nDrift: 2 of 6 branch(es) changed outside Git.\n")
    assert "| `local` | `main` | drifted | `~ main, + hack` |" in text
    assert "| `local` | `new` | no-record | - |" in text
    assert "**Warnings**" in text


def test_hostile_names_stay_inert() -> None:
    branches = tuple(
        BranchDrift("local", name, Drift(status="drifted", changed=[name], added=[name + "2"])) for name in HOSTILE
    )
    text = render_markdown(DriftReport(branches, NOW))
    tokens = parse(text)
    headings = [t for t in tokens if t.type == "heading_open"]
    assert len(headings) == 1, "only the report's own heading"
    rows = [t for t in tokens if t.type == "tr_open"]
    assert len(rows) == 1 + len(HOSTILE), "one table row per branch, none split or added"
    for token in tokens:
        if token.type == "inline":
            for child in token.children or []:
                assert child.type not in ("html_inline", "link_open", "image", "em_open", "s_open"), child
        assert token.type not in ("html_block", "fence", "code_block"), token


def test_markdown_names_at_most_fifty_modules_per_branch() -> None:
    names = [f"role/r{i:04}" for i in range(2000)]
    report = DriftReport((BranchDrift("local", "main", Drift(status="drifted", changed=names)),), NOW)
    text = render_markdown(report)
    assert "~ role/r0049 and 1950 more" in text
    assert "role/r0050" not in text
    assert len(text) < 5000
    assert "role/r1999" in render_text(report), "the terminal and JSON keep every name"
