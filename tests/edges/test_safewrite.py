"""``gitops/edges/safewrite.py``: pull's writes, whole or not at all and never through a link (real files)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gitops.edges.safewrite import LinkInTheWay, write_under


def test_a_file_is_written_with_its_folders(tmp_path: Path) -> None:
    write_under(tmp_path / "src", "role/harvester.js", b"module.exports = 1;")
    assert (tmp_path / "src" / "role" / "harvester.js").read_bytes() == b"module.exports = 1;"
    assert os.listdir(tmp_path / "src" / "role") == ["harvester.js"]  # no temporary file left


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "run.js"
    path.write_bytes(b"old")
    path.chmod(0o750)
    write_under(tmp_path, "run.js", b"new")
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750


def test_a_folder_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "lib").symlink_to(outside)
    with pytest.raises(LinkInTheWay, match="lib is a symbolic link"):
        write_under(root, "lib/x.js", b"x")
    assert os.listdir(outside) == []


def test_a_file_that_is_a_link_is_replaced_never_written_through(tmp_path: Path) -> None:
    # _write_at's own LinkInTheWay is raised inside its suppress(OSError), so the link is not refused: the rename
    # replaces the link itself, and the file it pointed at is never touched (reported to the lead, issue 47).
    target = tmp_path / "secret.txt"
    target.write_bytes(b"keep")
    root = tmp_path / "root"
    root.mkdir()
    (root / "main.js").symlink_to(target)
    write_under(root, "main.js", b"x")
    assert target.read_bytes() == b"keep"
    assert not (root / "main.js").is_symlink()
    assert (root / "main.js").read_bytes() == b"x"


def test_a_file_where_a_folder_should_be_is_refused(tmp_path: Path) -> None:
    (tmp_path / "lib").write_bytes(b"a file")
    with pytest.raises(LinkInTheWay, match="lib is not a folder"):
        write_under(tmp_path, "lib/x.js", b"x")
