"""``gitops/core/artifact.py``: a code set file's content, written and read back as values, every tampering refused
with what is wrong."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from gitops.core import artifact
from gitops.core.artifact import ArtifactProblem
from gitops.core.codeset import CodeSet, Module
from gitops.core.local import LocalBranch

COMMIT = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
MANIFEST = b"version: 1\n"


def _branch(server: str = "local", name: str = "main") -> LocalBranch:
    code = CodeSet.of([Module("main", text="module.exports.loop = () => {};"), Module("blob", binary=b"\x00\x01")])
    return LocalBranch(server, name, code, {"main": "src/main.js", "blob": "src/blob"}, {"blob": "binary"})


def _data(*branches: LocalBranch) -> dict[str, Any]:
    return artifact.artifact_data(
        list(branches or [_branch()]),
        commit=COMMIT,
        manifest_raw=MANIFEST,
        manifest_name="gitops.yaml",
        warnings=["a warning"],
    )


def test_a_code_set_reads_back_as_it_was_written() -> None:
    read = artifact.artifact_from_data(_data())
    assert read.commit == COMMIT
    assert read.manifest_sha256 == hashlib.sha256(MANIFEST).hexdigest() == artifact.manifest_sha256(MANIFEST)
    assert read.warnings == ["a warning"]
    [branch] = read.branches
    assert (branch.server, branch.branch, branch.code, branch.files) == (
        "local",
        "main",
        _branch().code,
        _branch().files,
    )
    assert branch.kinds == {"main": "javascript", "blob": "binary"}


def _tampered(change: str) -> dict[str, Any]:
    data = copy.deepcopy(_data())
    [module] = [m for m in data["branches"][0]["modules"] if m["name"] == "main"]
    if change == "text":
        module["text"] += "// a line more"
    elif change == "both":
        module["base64"] = "AA=="
    elif change == "kind":
        module["kind"] = "typescript"
    elif change == "name":
        module["name"] = "a$DOT$b"
    elif change == "twice":
        data["branches"][0]["modules"].append(dict(module))
    elif change == "commit":
        data["commit"] = "HEAD"
    elif change == "version":
        data["format_version"] = 2
    elif change == "branch twice":
        data["branches"].append(copy.deepcopy(data["branches"][0]))
    return data


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("text", "does not match its size and sha256 (the file was cut or changed after the build wrote it)"),
        ("both", "must have exactly one of 'text' and 'base64'"),
        ("kind", "has kind 'typescript'"),
        ("name", "cannot be deployed"),
        ("twice", "holds module 'main' twice"),
        ("commit", "names commit 'HEAD', which is not a commit id"),
        ("version", "has format_version 2; this gitops reads version 1"),
        ("branch twice", "holds branch local/main twice"),
    ],
)
def test_a_changed_file_is_refused_saying_what_is_wrong(change: str, words: str) -> None:
    with pytest.raises(ArtifactProblem) as refused:
        artifact.artifact_from_data(_tampered(change))
    assert words in str(refused.value)


@pytest.mark.parametrize("data", [None, [], {"format": "other"}, {"format": "screeps-gitops-codeset"}])
def test_what_is_not_a_code_set_is_refused(data: Any) -> None:
    with pytest.raises(ArtifactProblem):
        artifact.artifact_from_data(data)


def test_branches_are_picked_in_the_order_asked_and_a_missing_one_is_named() -> None:
    read = artifact.artifact_from_data(_data(_branch("a"), _branch("b")))
    assert [b.server for b in artifact.pick_branches(read, [("b", "main"), ("a", "main")])] == ["b", "a"]
    with pytest.raises(ArtifactProblem, match=r"holds no code for c/main, a/other \(it was built for other"):
        artifact.pick_branches(read, [("c", "main"), ("a", "other")])


def test_the_largest_file_grows_with_the_branches() -> None:
    assert artifact.max_file_bytes(0) == artifact.max_file_bytes(1) == artifact.MAX_BRANCH_BYTES + 1024 * 1024
    assert artifact.max_file_bytes(3) == 3 * artifact.MAX_BRANCH_BYTES + 1024 * 1024
