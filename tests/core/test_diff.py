"""The branch diff: added, changed, removed, kept; capped, minified and binary diffs."""

from __future__ import annotations

from gitops.core.codeset import CodeSet, Module
from gitops.core.diff import MAX_DIFF_LINES, diff_branch
from gitops.core.remote import RemoteBranch


def remote_of(*modules: Module, downloaded: bool = True) -> RemoteBranch:
    branch = RemoteBranch.from_code("main", CodeSet.of(list(modules)), 0.0)
    if downloaded:
        return branch
    # The ledger keeps digests and sizes, never the text.
    assert branch.modules is not None
    facts = {n: type(f)(f.name, f.digest, f.size, f.is_binary, None) for n, f in branch.modules.items()}
    return RemoteBranch("main", facts, branch.digest, 0.0, "ledger")


def test_identical_sets_have_no_changes() -> None:
    local = CodeSet.of([Module("main", text="a"), Module("b", text="b")])
    diff = diff_branch(local, remote_of(Module("main", text="a"), Module("b", text="b")).modules)
    assert not diff.has_changes
    assert diff.unchanged == 2


def test_added_changed_removed_are_named_with_sizes() -> None:
    local = CodeSet.of([Module("main", text="new\n"), Module("role/harvester", text="h")])
    remote = remote_of(Module("main", text="old\n"), Module("gone", text="xyz"))
    diff = diff_branch(local, remote.modules)
    assert [c.name for c in diff.added] == ["role/harvester"]
    assert [c.name for c in diff.changed] == ["main"]
    assert [(c.name, c.old_size, c.new_size) for c in diff.removed] == [("gone", 3, None)]
    assert diff.changed[0].diff == "--- server/main\n+++ repo/main\n@@ -1 +1 @@\n-old\n+new"


def test_keep_turns_server_only_modules_into_kept() -> None:
    local = CodeSet.of([Module("main", text="a")])
    diff = diff_branch(
        local, remote_of(Module("main", text="a"), Module("extra", text="e")).modules, remote_only="keep"
    )
    assert not diff.has_changes
    assert [c.name for c in diff.kept] == ["extra"]


def test_missing_branch_adds_everything() -> None:
    diff = diff_branch(CodeSet.of([Module("main", text="a")]), None)
    assert [c.name for c in diff.added] == ["main"]


def test_long_diff_is_cut_with_a_note() -> None:
    old = "\n".join(f"line {i}" for i in range(400))
    new = "\n".join(f"LINE {i}" for i in range(400))
    diff = diff_branch(CodeSet.of([Module("main", text=new)]), remote_of(Module("main", text=old)).modules)
    change = diff.changed[0]
    assert change.diff is not None
    lines = change.diff.splitlines()
    assert len(lines) == MAX_DIFF_LINES + 1
    assert lines[-1].endswith("more diff lines not shown")
    assert change.note == f"diff cut at {MAX_DIFF_LINES} lines"


def test_minified_file_shows_no_diff() -> None:
    old, new = "var a=1;" * 500, "var b=2;" * 500
    change = diff_branch(CodeSet.of([Module("main", text=new)]), remote_of(Module("main", text=old)).modules).changed[0]
    assert change.diff is None
    assert change.note == "minified module (very long lines): sizes and hashes only"
    assert change.old_digest != change.new_digest


def test_binary_and_ledger_only_changes_show_no_text() -> None:
    local = CodeSet.of([Module("lib.wasm", binary=b"\0asm\1"), Module("main", text="b")])
    remote = remote_of(Module("lib.wasm", binary=b"\0asm\2"), Module("main", text="a"), downloaded=False)
    notes = {c.name: c.note for c in diff_branch(local, remote.modules).changed}
    assert notes == {
        "lib.wasm": "binary module: sizes and hashes only",
        "main": "the server's content was not downloaded (planned from the ledger): sizes and hashes only",
    }


def test_line_ending_only_change_says_so() -> None:
    change = diff_branch(
        CodeSet.of([Module("main", text="a\r\nb\r\n")]), remote_of(Module("main", text="a\nb\n")).modules
    ).changed[0]
    assert (change.diff, change.note) == (None, "only line endings or the final newline differ")
