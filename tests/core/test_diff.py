"""The branch diff: added, changed, removed, kept; capped, minified and binary diffs."""

from __future__ import annotations

import dataclasses
import re

from gitops.core.codeset import CodeSet, Module
from gitops.core.diff import MAX_DIFF_BYTES, MAX_DIFF_LINES, MINIFIED_LINE, diff_branch, differ_only_in
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
    assert (
        change.note == "minified module (very long lines): sizes and hashes only; first difference at line 1, column 5"
    )
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
    assert (change.diff, change.note) == (
        None,
        "only line endings differ: CRLF on one side, LF on the other",
    )


def test_a_large_module_shows_no_diff() -> None:
    old = "a\n" * (MAX_DIFF_BYTES // 2 + 1)  # just over the size where difflib may take too long
    change = diff_branch(CodeSet.of([Module("main", text="b\n")]), remote_of(Module("main", text=old)).modules).changed[
        0
    ]
    assert (change.diff, change.note) == (
        None,
        "large module: sizes and hashes only; first difference at line 1, column 1",
    )
    assert (change.old_size, change.new_size) == (len(old), 2)


def test_long_files_of_short_lines_are_diffed() -> None:
    old = "\n".join("x" * (MINIFIED_LINE - 1) for _ in range(3))
    new = old + "\nend"
    change = diff_branch(CodeSet.of([Module("main", text=new)]), remote_of(Module("main", text=old)).modules).changed[0]
    assert change.note is None
    assert change.diff is not None
    assert change.diff.endswith("+end")


def test_one_long_line_on_either_side_is_minified() -> None:
    long_line = "y" * (MINIFIED_LINE + 1)
    change = diff_branch(
        CodeSet.of([Module("main", text="short\n")]), remote_of(Module("main", text=f"a\n{long_line}\n")).modules
    ).changed[0]
    assert (
        change.note == "minified module (very long lines): sizes and hashes only; first difference at line 1, column 1"
    )


def test_the_diff_cap_is_a_parameter() -> None:
    old, new = "a\nb\nc\n", "A\nB\nC\n"
    change = diff_branch(
        CodeSet.of([Module("main", text=new)]), remote_of(Module("main", text=old)).modules, max_diff_lines=4
    ).changed[0]
    assert change.diff == "--- server/main\n+++ repo/main\n@@ -1,3 +1,3 @@\n-a\n... 5 more diff lines not shown"
    assert change.note == "diff cut at 4 lines"


def test_a_final_newline_alone_is_a_line_ending_change() -> None:
    change = diff_branch(CodeSet.of([Module("main", text="a")]), remote_of(Module("main", text="a\n")).modules).changed[
        0
    ]
    assert (change.diff, change.note) == (
        None,
        "only the end differs: the server's ends with '\\n', the repository's with '' (a newline the build or an "
        "uploader adds or drops)",
    )


def test_a_minified_source_map_that_differs_by_its_last_newline_says_so() -> None:
    # rollup-plugin-screeps uploads the wrapped map with no newline at the end; a tool that adds one changes the
    # module: the plan says exactly that, where sizes and hashes alone would not show it.
    the_map = "module.exports = {" + '"mappings":"' + "A" * 5000 + '"};'
    change = diff_branch(
        CodeSet.of([Module("main.js.map", text=the_map + "\n")]), remote_of(Module("main.js.map", text=the_map)).modules
    ).changed[0]
    assert change.note is not None
    assert change.note.startswith("only the end differs: the server's ends with '', the repository's with '\\n'")


def test_rows_carry_sizes_digests_and_the_binary_flag() -> None:
    new_wasm, old_wasm = Module("lib.wasm", binary=b"\0asm\1\2"), Module("lib.wasm", binary=b"\0asm")
    kept, gone = Module("kept.wasm", binary=b"\1"), Module("gone", text="gone")
    remote = remote_of(old_wasm, kept, Module("main", text="m"))
    local = CodeSet.of([new_wasm, Module("main", text="m"), Module("new", text="n")])
    diff = diff_branch(local, remote.modules, remote_only="keep")
    assert dataclasses.asdict(diff.changed[0]) == {
        "name": "lib.wasm",
        "change": "changed",
        "old_size": 4,
        "new_size": 6,
        "old_digest": old_wasm.digest,
        "new_digest": new_wasm.digest,
        "binary": True,
        "diff": None,
        "note": "binary module: sizes and hashes only",
    }
    assert (diff.added[0].new_digest, diff.added[0].old_digest, diff.added[0].binary) == (
        Module("new", text="n").digest,
        None,
        False,
    )
    assert (diff.kept[0].name, diff.kept[0].old_size, diff.kept[0].new_size, diff.kept[0].binary) == (
        "kept.wasm",
        1,
        1,
        True,
    )
    assert diff.unchanged == 1
    assert [c.name for c in (*diff.added, *diff.changed, *diff.removed)] == [
        "new",
        "lib.wasm",
    ]  # kept modules are no change
    removed = diff_branch(local, remote_of(old_wasm, gone).modules).removed[0]
    assert (removed.name, removed.new_digest, removed.old_digest) == ("gone", None, gone.digest)


def test_an_existing_empty_branch_adds_everything() -> None:
    diff = diff_branch(CodeSet.of([Module("main", text="a")]), {})
    assert ([c.name for c in diff.added], diff.unchanged, diff.has_changes) == (["main"], 0, True)


# --- ignore_lines: lines a build stamps with the time ------------------------------------------------------------

STAMP = r"// Built at .*"


def test_differ_only_in_ignores_whole_lines_that_match() -> None:
    patterns = [re.compile(STAMP)]
    old = "// Built at 2026-11-26 10:00\nmodule.exports.loop = () => {};\n"
    new = "// Built at 2026-11-27 05:00\nmodule.exports.loop = () => {};\n"
    assert differ_only_in(old, new, patterns)
    # A stamp line added or dropped is ignored too.
    assert differ_only_in("a\n", "// Built at now\na\n", patterns)
    # Any other difference counts, next to a stamp or alone.
    assert not differ_only_in(old, new.replace("{}", "{ x(); }"), patterns)
    assert not differ_only_in("a\n", "a\r\n", patterns)
    # Whole lines only: a stamp inside a line of code is not a stamped line.
    assert not differ_only_in("f(); // Built at 1\n", "f(); // Built at 2\n", patterns)
    # Without patterns nothing is ignored.
    assert not differ_only_in(old, new, [])


def test_a_module_that_differs_only_in_ignored_lines_is_listed_apart() -> None:
    local = CodeSet.of([Module("main", text="// Built at 2\nloop();\n"), Module("b", text="b")])
    remote = remote_of(Module("main", text="// Built at 1\nloop();\n"), Module("b", text="b"))
    diff = diff_branch(local, remote.modules, ignore_lines=[STAMP])
    assert not diff.has_changes
    assert [m.name for m in diff.ignored] == ["main"]
    assert diff.unchanged == 1
    assert diff.changed == ()
    # The row is the module's real change (sent as built when something else changes too).
    assert diff.ignored[0].diff is not None
    assert "+// Built at 2" in diff.ignored[0].diff
    # Without the key the same module is a change.
    plain = diff_branch(local, remote.modules)
    assert [m.name for m in plain.changed] == ["main"]
    assert plain.ignored == ()


def test_a_module_known_only_by_digest_is_a_change_even_with_ignore_lines() -> None:
    local = CodeSet.of([Module("main", text="// Built at 2\nloop();\n")])
    remote = remote_of(Module("main", text="// Built at 1\nloop();\n"), downloaded=False)
    diff = diff_branch(local, remote.modules, ignore_lines=[STAMP])
    assert [m.name for m in diff.changed] == ["main"]
    assert diff.ignored == ()


def test_binary_modules_are_never_compared_by_lines() -> None:
    local = CodeSet.of([Module("lib.wasm", binary=b"// Built at 2")])
    remote = remote_of(Module("lib.wasm", binary=b"// Built at 1"))
    diff = diff_branch(local, remote.modules, ignore_lines=[STAMP])
    assert [m.name for m in diff.changed] == ["lib.wasm"]
