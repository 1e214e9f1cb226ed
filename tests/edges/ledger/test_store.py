"""A FIFO (or a folder) in place of a ledger's files is set aside or ignored at once, never waited on (issue 37):
a plain open of a FIFO blocks until a writer comes, and plan hung there."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gitops.edges.clock import ManualClock
from gitops.edges.ledger import Ledger

URL = "https://screeps.com/ptr"
FP = "0123456789abcdef"
START = 1_800_000_000.0

#: Opens the ledger in a child process, so that a regression blocks the child (killed at the timeout), not pytest.
OPEN = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from gitops.edges.clock import ManualClock
    from gitops.edges.ledger import Ledger
    ledger = Ledger.open(Path(sys.argv[1]), sys.argv[2], sys.argv[3], clock=ManualClock(float(sys.argv[4])))
    for warning in ledger.warnings:
        print(warning)
    ledger.save()
    ledger.close()
    """
)


def ledger_path(tmp_path: Path) -> Path:
    return Ledger.open(tmp_path, URL, FP, clock=ManualClock(START)).path


def open_in_child(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", OPEN, str(tmp_path), URL, FP, str(START)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_ledger_that_is_not_a_file_is_set_aside_at_once(tmp_path: Path, kind: str) -> None:
    path = ledger_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    done = open_in_child(tmp_path)
    assert done.returncode == 0, done.stderr
    what = "a FIFO" if kind == "fifo" else "a folder"
    assert f"the ledger at {path} was corrupt ({what}, not a file); set aside as {path}.corrupt-" in done.stdout
    assert stat.S_ISREG(os.lstat(path).st_mode)  # the save wrote a ledger in its place
    [aside] = [p for p in path.parent.iterdir() if p.name.startswith(f"{path.name}.corrupt-")]
    assert stat.S_ISFIFO(os.lstat(aside).st_mode) if kind == "fifo" else aside.is_dir()


def test_fifos_as_the_ledgers_side_files_do_not_block(tmp_path: Path) -> None:
    path = ledger_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    names = {p.name for p in path.parent.iterdir()}
    assert open_in_child(tmp_path).returncode == 0
    side = sorted({p.name for p in path.parent.iterdir()} - names - {path.name})
    assert side  # the lock's owner note, the pointer to the last credentials
    for name in side:
        target = path.parent / name
        if target.is_file():
            target.unlink()
            os.mkfifo(target)
    done = open_in_child(tmp_path)
    assert done.returncode == 0, done.stderr
