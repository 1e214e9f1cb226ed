"""Drift, as pure logic: the last applied record against what the server holds now, and the plan's findings."""

from __future__ import annotations

import json

import pytest

from gitops.core.applied import AppliedRecord
from gitops.core.codeset import CodeSet, WireModule
from gitops.core.drift import (
    BranchDrift,
    DriftReport,
    compare,
    equal_to_repository,
    record_from_branch,
    record_from_wire,
    source_commit,
    source_text,
    with_drift,
)
from gitops.core.driftfinding import Drift
from gitops.core.remote import RemoteBranch
from gitops.render.plan import drift_document, drift_text, render_json, render_markdown, render_text
from tests.core.factories import NOW, local, manifest, on_server, plan, view

APPLIED = {"main": "loop();\n", "role/harvester": "harvest();\n", "util": "u();\n"}


def applied(modules: dict[str, str] = APPLIED, *, ago: float = 3 * 3600) -> AppliedRecord:
    return record_from_wire(
        "main", modules, at=NOW - ago, how="upload", commit="1a2b3c4d5e6f7a8b9c0d", source="worktree"
    )


def test_no_record_is_not_drift() -> None:
    found = compare(on_server("main", {"main": "x"}), None)
    assert found.status == "no-record"
    assert not found.drifted


def test_the_same_set_is_no_drift() -> None:
    found = compare(on_server("main", APPLIED), applied())
    assert found.status == "none"
    assert (found.applied_at, found.applied_how, found.commit) == (NOW - 3 * 3600, "upload", "1a2b3c4d5e6f7a8b9c0d")


def test_modules_changed_outside_git_are_named() -> None:
    now = {"main": "loop(); // edited in game\n", "role/harvester": "harvest();\n", "hack": "x();\n"}
    found = compare(on_server("main", now), applied())
    assert found.drifted
    assert (found.added, found.changed, found.removed, found.missing) == (["hack"], ["main"], ["util"], False)
    assert found.modules_text() == "~ main, + hack, - util"


def test_a_deleted_branch_is_drift_with_every_module_removed() -> None:
    found = compare(on_server("main", None), applied())
    assert found.drifted
    assert found.missing
    assert found.removed == sorted(APPLIED)
    assert found.modules_text() == "the branch was deleted"


@pytest.mark.parametrize("how", ["own-upload", "ledger"])
def test_a_state_not_learnt_on_the_server_now_says_nothing(how: str) -> None:
    found = compare(on_server("main", {"main": "other"}, how=how), applied())  # type: ignore[arg-type]
    assert found.status == "unknown"
    assert compare(None, applied()).status == "unknown"


def test_a_pending_upload_found_on_the_server_is_no_drift() -> None:
    pending = record_from_wire("main", {"main": "new();\n"}, at=NOW - 60, how="upload", commit="ffff")
    found = compare(on_server("main", {"main": "new();\n"}), applied(), pending)
    assert found.status == "none"
    assert found.pending_landed
    assert (found.applied_at, found.commit) == (NOW - 60, "ffff")
    # Anything else is still drift, measured against the last applied record.
    assert compare(on_server("main", {"main": "other();\n"}), applied(), pending).drifted


def test_records_keep_digests_not_text() -> None:
    record = record_from_branch(on_server("main", APPLIED), how="verified")
    assert all(m.text is None for m in record.modules.values())
    assert record.digest == applied().digest
    # Facts that carry no text (a branch confirmed from the ledger) are the record's as they are.
    again = record_from_branch(RemoteBranch("main", record.modules, record.digest, NOW, "ledger"), how="verified")
    assert all(again.modules[n] is m for n, m in record.modules.items())
    with pytest.raises(ValueError, match="does not exist"):
        record_from_branch(on_server("main", None), how="verified")


def test_source_text_and_commit() -> None:
    assert source_text({"kind": "ref", "ref": "main"}) == "ref main"
    assert source_text({"kind": "worktree", "dirty": True}) == "worktree (uncommitted changes)"
    # gitops rollback: the code kept for a deploy, recorded under that deploy's commit (issue 46)
    assert source_text({"kind": "rollback", "ref": "deploy #2", "commit": "c" * 40}) == "rollback to deploy #2"
    assert source_commit({"kind": "rollback", "ref": "deploy #2", "commit": "c" * 40}) == "c" * 40
    assert source_text({"kind": "worktree", "dirty": False}) == "worktree"
    assert source_commit({"commit": "abc"}) == "abc"
    assert source_commit({"commit": None}) is None


def test_the_plan_carries_drift_in_text_markdown_and_json() -> None:
    loaded = manifest()
    server = on_server("main", {"main": "loop(); // edited in game\n", "hack": "x();\n"})
    made = plan(loaded, local(("local", "main", {"main": "loop();\n"})), view("local", server))
    assert not equal_to_repository(made.branches[0])
    drift = compare(server, applied({"main": "loop();\n"}))
    marked = with_drift(made, {("local", "main"): drift})
    text = render_text(marked, now=NOW)
    assert (
        "  drift: changed outside Git since this tool applied it 3.0 h ago (commit 1a2b3c4d5e6f): ~ main, + hack\n"
        in text
    )
    markdown = render_markdown(marked, now=NOW)
    assert "**Drift** (applying overwrites these changes made outside Git)" in markdown
    assert "- `local/main`: changed outside Git since this tool applied it 3.0 h ago" in markdown
    [entry] = json.loads(render_json(marked, now=NOW))["branches"]
    assert entry["drift"] is True
    assert entry["drift_status"] == "drifted"
    assert entry["changed_outside_git"] == {
        "added": ["hack"],
        "changed": ["main"],
        "removed": [],
        "branch_deleted": False,
    }
    assert entry["last_applied"]["how"] == "upload"
    assert entry["last_applied"]["age_seconds"] == 3 * 3600
    # Without drift there is no drift line.
    assert "drift:" not in render_text(made, now=NOW)
    assert "**Drift**" not in render_markdown(made, now=NOW)


def test_a_branch_equal_to_the_repository_on_the_server_now() -> None:
    loaded = manifest()
    code = {"main": "loop();\n"}
    assert equal_to_repository(
        plan(loaded, local(("local", "main", code)), view("local", on_server("main", code))).branches[0]
    )
    from_ledger = on_server("main", code, how="ledger")
    assert not equal_to_repository(plan(loaded, local(("local", "main", code)), view("local", from_ledger)).branches[0])
    missing = on_server("main", None)
    assert not equal_to_repository(plan(loaded, local(("local", "main", code)), view("local", missing)).branches[0])


def test_drift_documents() -> None:
    assert drift_document(None, NOW) == {
        "drift": None,
        "drift_status": None,
        "changed_outside_git": None,
        "last_applied": None,
    }
    assert drift_document(Drift(status="no-record"), NOW)["drift"] is None
    assert drift_document(Drift(status="no-record"), NOW)["last_applied"] is None
    assert drift_document(Drift(status="none", applied_at=NOW), NOW)["drift"] is False
    assert drift_document(Drift(status="unknown", applied_at=NOW), NOW)["drift"] is None
    assert (
        drift_text(Drift(status="drifted", changed=["a"]), NOW) == "changed outside Git since this tool applied it: ~ a"
    )


def test_report() -> None:
    drifted = BranchDrift("local", "main", Drift(status="drifted", changed=["main"]))
    quiet = BranchDrift("local", "sim", Drift(status="none"))
    report = DriftReport((drifted, quiet), NOW)
    assert report.has_drift
    assert report.drifted == [drifted]
    assert drifted.label == "local/main"
    assert not DriftReport((quiet,), NOW).has_drift


@pytest.mark.parametrize(
    "modules",
    [
        APPLIED,
        {"z": "last();\n", "a": "first();\n", "ü/名": "// é ☃ 𝄞\n", "": "empty name\n"},
        {"main": "loop();\n", "wasm": {"binary": "AGFzbQEAAAA="}, "node64": {"binary": "AGFzbQEAAAA"}},
        {},
    ],
)
def test_an_uploads_record_is_that_of_the_code_it_sends(modules: dict[str, WireModule]) -> None:
    """``record_from_wire`` skips the module objects for speed; its record is the one those objects give."""
    made = record_from_wire("main", modules, at=NOW, how="upload", commit="c0ffee", source="worktree")
    seen = RemoteBranch.from_code("main", CodeSet.from_wire(dict(modules)), NOW)
    assert made == record_from_branch(seen, how="upload", commit="c0ffee", source="worktree")
    assert list(made.modules) == list(modules)


@pytest.mark.parametrize("value", [None, 3, ["x"], {"binary": 3}, {"text": "x"}, {"binary": "AA", "more": "x"}])
def test_an_upload_of_something_that_is_not_a_module_has_no_record(value: object) -> None:
    with pytest.raises(ValueError, match="module 'bad'"):
        record_from_wire("main", {"main": "loop();\n", "bad": value}, at=NOW, how="upload")  # type: ignore[dict-item]
