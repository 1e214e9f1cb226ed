"""``gitops/edges/codestore.py``: the code kept for an undo, beside the ledger, on real files; only a file that
still holds that very code is given back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitops.core.codeset import CodeSet, Module, WireModule
from gitops.edges.codestore import folder_for, is_kept, keep, kept, prune, write_kept


def _set(text: str) -> tuple[str, dict[str, WireModule]]:
    code = CodeSet.of([Module("main", text=text), Module("blob", binary=b"\x00\x01")])
    return code.digest, dict(code.wire())


def test_the_folder_is_beside_the_ledger() -> None:
    assert folder_for(Path("/state/ledger/x/alice.json")) == Path("/state/ledger/x/alice.code")


def test_kept_code_reads_back(tmp_path: Path) -> None:
    digest, modules = _set("a")
    assert keep(tmp_path / "k", digest, modules)
    assert is_kept(tmp_path / "k", digest)
    assert kept(tmp_path / "k", digest) == modules
    assert kept(tmp_path / "k", "other") is None


def test_a_file_that_no_longer_holds_that_code_is_not_given_back(tmp_path: Path) -> None:
    digest, modules = _set("a")
    write_kept(tmp_path, digest, modules)
    [path] = tmp_path.glob("*.modules")
    path.write_bytes(path.read_bytes().replace(b'"a"', b'"b"'))
    assert kept(tmp_path, digest) is None
    write_kept(tmp_path, digest, modules)  # written anew
    assert kept(tmp_path, digest) == modules


def test_a_fifo_under_the_name_is_not_read(tmp_path: Path) -> None:
    digest, modules = _set("a")
    write_kept(tmp_path, digest, modules)
    [path] = tmp_path.glob("*.modules")
    path.unlink()
    os.mkfifo(path)
    assert kept(tmp_path, digest) is None  # at once, no wait for a writer


def test_a_folder_that_cannot_be_written(tmp_path: Path) -> None:
    digest, modules = _set("a")
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    assert keep(blocker / "k", digest, modules) is False
    with pytest.raises(OSError):  # noqa: PT011 - the system's error, passed on for apply to word
        write_kept(blocker / "k", digest, modules)


def test_prune_keeps_only_the_sets_named(tmp_path: Path) -> None:
    first, one = _set("a")
    second, two = _set("b")
    write_kept(tmp_path, first, one)
    write_kept(tmp_path, second, two)
    prune(tmp_path, [second])
    assert not is_kept(tmp_path, first)
    assert kept(tmp_path, second) == two
    prune(tmp_path / "missing", [])  # nothing to prune: no error
