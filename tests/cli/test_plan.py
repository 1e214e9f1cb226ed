"""``plan --out`` writes only a regular file or a new path (issue 37): never replaces a device, a FIFO, a symbolic
link (and never writes through it) or a folder; it says so before any request, and nothing is replaced."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gitops.errors import ExitCode
from gitops.standin.testing import StandIn
from tests.project import Project, one_branch_project


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    return one_branch_project(tmp_path, standin, capsys, monkeypatch)


def _refused(project: Project, standin: StandIn, out: Path, what: str) -> None:
    result = project.plan("--out", str(out))
    assert result.code == ExitCode.USAGE, result.err
    assert f"Error: --out {out} is {what}; a plan is saved only to a regular file or a new path" in result.err
    assert "Name a new file (or a regular file to overwrite) with --out" in result.err
    assert "Traceback" not in result.err
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]  # no temporary left


def test_a_symlink_to_a_file_outside_is_refused_and_the_target_untouched(
    project: Project, standin: StandIn, tmp_path: Path
) -> None:
    target = tmp_path / "outside" / "precious"
    target.parent.mkdir()
    target.write_text("keep me\n", encoding="utf-8")
    link = tmp_path / "plan.json"
    link.symlink_to(target)
    _refused(project, standin, link, "a symbolic link")
    assert link.is_symlink()
    assert target.read_text(encoding="utf-8") == "keep me\n"


def test_a_fifo_is_refused_without_blocking(project: Project, standin: StandIn, tmp_path: Path) -> None:
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    _refused(project, standin, fifo, "a FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_link_to_a_device_is_refused(project: Project, standin: StandIn, tmp_path: Path) -> None:
    # Not /dev/null itself: a regression would replace the machine's /dev/null (the tests may run as root).
    link = tmp_path / "devnull"
    link.symlink_to("/dev/null")
    _refused(project, standin, link, "a symbolic link")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_regular_file_and_a_new_path_are_written(project: Project, tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text("{}", encoding="utf-8")
    assert project.plan("--out", str(old)).code == ExitCode.CHANGES
    assert project.plan("--out", str(tmp_path / "new" / "plan.json")).code == ExitCode.CHANGES
    assert old.stat().st_size > 2
    assert (tmp_path / "new" / "plan.json").is_file()
