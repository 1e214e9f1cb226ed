"""``gitops/config/reading.py``: key paths and their lines, and reading an input file with a size cap, regular files
only (real files, a real FIFO)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitops.config.reading import Loc, Unreadable, counted, format_loc, line_of, read_capped, size_text


@pytest.mark.parametrize(
    ("loc", "text"),
    [
        ((), "(top level)"),
        (("branches", 0, "include", 1), "branches[0].include[1]"),
        (("servers", "local", "url"), "servers.local.url"),
        (("budget", "reserve", "POST /api/user/code"), 'budget.reserve["POST /api/user/code"]'),
        (("servers", "ünï"), 'servers["ünï"]'),
        ((1.5, "x"), '["1.5"].x'),  # a key written as a number reaches a path as that value
    ],
)
def test_a_key_path_in_words(loc: tuple[object, ...], text: str) -> None:
    assert format_loc(loc) == text  # type: ignore[arg-type]


def test_the_line_of_a_key_or_of_its_nearest_parent() -> None:
    locations: dict[Loc, int] = {(): 1, ("servers",): 3, ("servers", "local"): 4}
    assert line_of(locations, ("servers", "local", "url")) == 4
    assert line_of(locations, ("branches", 0)) == 1
    assert line_of({}, ("x",)) == 1


def test_counted_and_sizes_in_words() -> None:
    assert counted(["a"]) == "1 problem"
    assert counted(["a", "b", "c"]) == "3 problems"
    assert size_text(8 * 1024 * 1024) == "8,388,608 bytes (8.0 MB)"


def test_a_file_under_the_cap_is_read(tmp_path: Path) -> None:
    path = tmp_path / "gitops.yaml"
    path.write_bytes(b"version: 1\n")
    assert read_capped(path, "gitops.yaml", limit=11) == b"version: 1\n"


def test_a_file_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "gitops.yaml"
    path.write_bytes(b"x" * 12)
    with pytest.raises(Unreadable) as refused:
        read_capped(path, "gitops.yaml", limit=11, what="a manifest")
    assert refused.value.problems == [
        "gitops.yaml:1: the file is 12 bytes (0.0 MB), and a manifest may have at most 11 bytes (0.0 MB); it was not "
        "read: check that this is the right file"
    ]


def test_a_fifo_or_a_folder_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(Unreadable, match="is a FIFO \\(named pipe\\), not a regular file; this file must be a file"):
        read_capped(fifo, "pipe.yaml")
    with pytest.raises(Unreadable, match="is a folder, not a regular file"):
        read_capped(tmp_path, "here")


def test_a_missing_file_raises_the_os_error_for_its_caller_to_word(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_capped(tmp_path / "none.yaml", "none.yaml")
