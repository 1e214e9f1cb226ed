"""``gitops/edges/atomicfile.py``: a file replaced through a temporary file in its folder, on a real file system."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gitops.edges.atomicfile import replace_atomically


def test_the_file_holds_the_new_content_and_no_temporary_file_is_left(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    path.write_bytes(b"old")
    replace_atomically(path, b"new", temp_prefix=".ledger-", fsync=True)
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.json"]


def test_a_new_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "kept.json"
    replace_atomically(path, b"{}", temp_prefix=".kept-")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_failed_rename_keeps_the_old_content_and_removes_the_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "target"
    path.mkdir()  # a folder in the way: the rename fails
    (path / "inside").write_text("x", encoding="utf-8")
    with pytest.raises(IsADirectoryError):
        replace_atomically(path, b"new", temp_prefix=".t-")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]
    assert (path / "inside").read_text(encoding="utf-8") == "x"


def test_a_missing_folder_raises_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        replace_atomically(tmp_path / "none" / "x", b"1", temp_prefix=".t-")
    assert os.listdir(tmp_path) == []
