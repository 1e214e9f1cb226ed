"""``gitops/core/local.py``: a branch's local code as values, the module name a file makes, the folders never read."""

from __future__ import annotations

import pytest

from gitops.config.model import Naming
from gitops.core.local import (
    LocalBranch,
    LocalCode,
    SourceInfo,
    in_git_folder,
    module_name,
    never_module,
    printable,
)
from tests.core.factories import code

COMMIT = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (SourceInfo("worktree", None, COMMIT, True), "working tree (commit 1a2b3c4d5e6f, uncommitted changes)"),
        (SourceInfo("worktree", None, COMMIT, False), "working tree (commit 1a2b3c4d5e6f)"),
        (SourceInfo("worktree", None, None, None), "working tree"),
        (SourceInfo("ref", "main", COMMIT, None), "ref main (commit 1a2b3c4d5e6f)"),
        (SourceInfo("codeset", "out/code.json", None, None), "code set out/code.json (commit none)"),
        (SourceInfo("rollback", "deploy #3", None, None), "the code kept for deploy #3 (commit unknown)"),
    ],
)
def test_a_source_describes_itself(source: SourceInfo, text: str) -> None:
    assert source.describe() == text


@pytest.mark.parametrize(
    ("path", "naming", "name"),
    [
        ("main.js", Naming(), "main"),
        ("role/harvester.js", Naming(), "role/harvester"),
        ("role/harvester.js", Naming(separator="."), "role.harvester"),
        ("pkg/bot_bg.wasm", Naming(), "pkg/bot_bg.wasm"),  # the default strips .js only
        ("pkg/bot_bg.wasm", Naming(strip_suffixes=[".js", ".wasm"]), "pkg/bot_bg"),
        ("main.bundle.js", Naming(strip_suffixes=[".js", ".bundle.js"]), "main"),  # the longest suffix
        (".js", Naming(), ".js"),  # a name is never emptied
    ],
)
def test_the_module_name_of_a_file(path: str, naming: Naming, name: str) -> None:
    assert module_name(path, binary=False, naming=naming) == name


def test_dependencies_and_gits_folder_never_hold_modules() -> None:
    assert never_module("node_modules/lodash/index.js")
    assert never_module("lib/.git/config")
    assert not never_module("node_modules")  # a file named so, not a folder
    assert not never_module("src/main.js")


def test_a_git_folder_is_found_in_any_case_and_after_normalising() -> None:
    assert in_git_folder(".git")
    assert in_git_folder("src/.GIT/hooks")
    assert in_git_folder("src/../.git/config")
    assert not in_git_folder("src/.github/workflow.js")


def test_a_name_that_is_not_utf8_prints_its_bytes() -> None:
    assert printable("main.js") == "main.js"
    assert printable("caf\udce9.js") == "caf\\xe9.js"
    assert printable("café.js") == "café.js"


def test_local_code_finds_a_branch_by_server_and_name() -> None:
    one = LocalBranch("s", "main", code({"main": "x"}), {"main": "src/main.js"})
    other = LocalBranch("t", "main", code({"main": "yy"}), {"main": "src/main.js"})
    local = LocalCode([one, other], SourceInfo("worktree", None, None, None), [])
    assert local.get("t", "main") is other
    assert local.get("s", "other") is None
    assert one.label == "s/main"
    assert one.server_length == len('{"main":"x"}')
