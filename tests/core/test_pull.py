"""``gitops/core/pull.py``: the files a pull writes under a branch's root, decided from values alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitops.config.model import BranchConfig
from gitops.core.codeset import Module
from gitops.core.pull import BranchPull, existing_modules, module_bytes, plan_branch_pull
from tests.core.factories import branch, code, manifest


def _config(**options: Any) -> BranchConfig:
    return manifest(branch(root="src", **options)).manifest.branches[0]


def _pull(modules: Mapping[str, str | bytes], files: Mapping[str, bytes] | None = None, **options: Any) -> BranchPull:
    on_disk = dict(files or {})
    return plan_branch_pull(_config(**options), code(modules), on_disk, on_disk.get)


def _writes(pull: BranchPull) -> list[tuple[str, str, str]]:
    return [(w.path, w.module, w.action) for w in pull.writes]


def test_each_module_goes_to_the_file_the_manifest_reads_back_as_it() -> None:
    pull = _pull({"main": "loop", "role/harvester": "h"})
    assert _writes(pull) == [("main.js", "main", "create"), ("role/harvester.js", "role/harvester", "create")]
    assert pull.writes[0].data == b"loop"
    assert pull.label == "local/main"
    assert pull.refused == []


def test_a_file_that_already_holds_the_module_is_left_the_same() -> None:
    pull = _pull({"main": "loop", "util": "new"}, {"main.js": b"loop", "util.js": b"old"})
    assert _writes(pull) == [("main.js", "main", "same"), ("util.js", "util", "update")]
    assert [w.path for w in pull.changes] == ["util.js"]


def test_a_separator_other_than_slash_makes_folders_the_manifest_reads_back() -> None:
    pull = _pull({"role.harvester": "h"}, naming={"separator": "."})
    assert [w.path for w in pull.writes] in (["role/harvester.js"], ["role.harvester.js"])
    assert existing_modules(_config(naming={"separator": "."}), [pull.writes[0].path]) == {
        "role.harvester": pull.writes[0].path
    }


def test_a_module_that_would_overwrite_a_protected_file_refuses_the_whole_pull() -> None:
    pull = _pull({"main": "loop", ".eslintrc": "{}"})
    assert pull.refused
    assert ".eslintrc" in " ".join(pull.refused)


def test_a_binary_module_is_written_as_its_bytes() -> None:
    assert module_bytes(Module("blob", binary=b"\x00\xff")) == b"\x00\xff"
    assert module_bytes(Module("main", text="é")) == "é".encode()
    pull = _pull({"main": "x", "bot.wasm": b"\x00asm"}, include=["**/*.js", "**/*.wasm"])
    assert ("bot.wasm", "bot.wasm", "create") in _writes(pull)
    assert pull.notes == []


def test_a_module_the_manifest_would_not_read_back_is_noted() -> None:
    pull = _pull({"main": "x", "bot.wasm": b"\x00asm"})
    assert [w.module for w in pull.writes] == ["main"]
    assert any("bot.wasm" in note and "next apply would remove it" in note for note in pull.notes)


def test_existing_modules_names_only_the_files_the_manifest_reads() -> None:
    found = existing_modules(_config(), ["main.js", "README.md", "node_modules/x/index.js", "lib/a.js"])
    assert found == {"main": "main.js", "lib/a": "lib/a.js"}
