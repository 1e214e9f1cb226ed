"""The phases of building a branch (``gitops.core.branchbuild``) that carry a rule of their own."""

from __future__ import annotations

from gitops.core.branchbuild import _select_files, _size_problems
from gitops.core.codeset import CodeSet, Module
from gitops.core.endpoints import MAX_BODY_BYTES, MAX_CODE_LENGTH
from gitops.core.globs import matcher


def test_selection_counts_each_include_and_skips_folders_that_never_hold_modules() -> None:
    includes = [matcher(["**/*.js"]), matcher(["lib/*.js"])]
    paths = ["lib/a.js", "main.js", "node_modules/x/index.js", "notes.txt", "old.js"]
    chosen = _select_files(paths, includes, matcher(["old.js"]))
    assert chosen.selected == ["lib/a.js", "main.js"]
    assert chosen.included == 3  # old.js is included, then excluded
    assert chosen.hits == [3, 1]  # node_modules/ never counts, not even as a match


def test_size_problems_count_as_the_server_does_then_the_body_in_bytes() -> None:
    small = CodeSet.of([Module("main", text="x")])
    assert _size_problems(small, small.server_length(), "main", "local/main") == []
    over = _size_problems(small, MAX_CODE_LENGTH + 1, "main", "local/main")
    assert len(over) == 1
    assert "over the 5 MB limit" in over[0]
    # Under 5 MB of UTF-16 units, but over the request body limit in UTF-8 bytes (3 bytes a character).
    wide = CodeSet.of([Module("main", text="\u4e00" * (MAX_BODY_BYTES // 3 + 1))])
    assert wide.server_length() <= MAX_CODE_LENGTH
    body = _size_problems(wide, wide.server_length(), "main", "local/main")
    assert len(body) == 1
    assert "request body limit" in body[0]
