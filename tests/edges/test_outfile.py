"""``gitops/edges/outfile.py``: ``--out`` writes a regular file or a new path, atomically, and refuses the rest in
the option's words (real files, links, a FIFO)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitops.edges.outfile import check_out_path, write_out
from gitops.errors import UsageError


def test_a_new_path_and_its_folders_are_written(tmp_path: Path) -> None:
    path = tmp_path / "out" / "plan.json"
    write_out(path, '{"plan": 1}\n', what="plan")
    assert path.read_text(encoding="ascii") == '{"plan": 1}\n'
    assert os.listdir(path.parent) == ["plan.json"]


def test_a_regular_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text("old", encoding="utf-8")
    write_out(path, "new", what="plan")
    assert path.read_text(encoding="utf-8") == "new"


@pytest.mark.parametrize("kind", ["a symbolic link", "a folder", "a FIFO"])
def test_anything_but_a_regular_file_is_refused_and_left_alone(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "plan.json"
    target = tmp_path / "elsewhere"
    target.write_text("keep", encoding="utf-8")
    if kind == "a symbolic link":
        path.symlink_to(target)
    elif kind == "a folder":
        path.mkdir()
    else:
        os.mkfifo(path)
    with pytest.raises(UsageError) as refused:
        write_out(path, "new", what="plan", option="--save")
    assert str(refused.value).startswith(
        f"--save {path} is {kind}; a plan is saved only to a regular file or a new path, and nothing was replaced"
    )
    assert refused.value.hint == "Name a new file (or a regular file to overwrite) with --save."
    assert target.read_text(encoding="utf-8") == "keep"


def test_a_folder_that_cannot_be_made_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(UsageError, match=r"cannot write the code set to .*: Not a directory"):
        write_out(tmp_path / "file" / "x.json", "{}", what="code set")


def test_a_path_through_a_file_is_worded_for_the_option(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(UsageError) as refused:
        check_out_path(tmp_path / "file" / "x", what="plan")
    assert refused.value.hint == "Name a file in a folder you can write to with --out."
