"""The ledger's lock file (gitops/edges/locking.py): exclusive between open files and processes, released when its
holder closes it or dies, never taken through a link; on POSIX without importing filelock."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gitops.edges import locking

posix_only = pytest.mark.skipif(not locking.HAS_FLOCK, reason="flock is POSIX")


@pytest.mark.parametrize("make", [locking.file_lock, locking._Library], ids=["flock", "filelock-library"])
def test_one_holder_at_a_time_and_free_again_when_released(
    tmp_path: Path, make: Callable[[Path], locking.FileLock]
) -> None:
    path = tmp_path / "ledger.json.lock"
    first, second = make(path), make(path)
    first.acquire(timeout=0)
    first.acquire(timeout=0)  # held already: nothing more
    started = time.monotonic()
    with pytest.raises(locking.LockTimeout):
        second.acquire(timeout=0.2, poll_interval=0.02)
    assert time.monotonic() - started >= 0.2  # it waited the whole time, polling
    first.release()
    first.release()  # twice is harmless
    second.acquire(timeout=0)
    second.release()


@posix_only
def test_a_holder_that_dies_releases_the_lock_at_once(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from gitops.edges.locking import file_lock; "
            f"file_lock(Path({str(path)!r})).acquire(timeout=0); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        lock = locking.file_lock(path)
        with pytest.raises(locking.LockTimeout):
            lock.acquire(timeout=0.1)
        holder.kill()
        holder.wait(timeout=30)
        lock.acquire(timeout=5)  # the system let go of the dead holder's lock
        lock.release()
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate(timeout=30)


@posix_only
def test_the_lock_file_is_never_opened_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    link = tmp_path / "ledger.json.lock"
    link.symlink_to(victim)
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        locking.file_lock(link).acquire(timeout=0)
    assert victim.read_text(encoding="utf-8") == "keep me\n"


@posix_only
def test_opening_a_ledger_does_not_import_filelock(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from gitops.edges.clock import SystemClock; "
        "from gitops.edges.ledger import Ledger; "
        f"ledger = Ledger.open(Path({str(tmp_path)!r}), 'https://screeps.com', 'fp', clock=SystemClock(), "
        "lock_wait=1); "
        "assert ledger._lock is not None; ledger.close(); print('filelock' in sys.modules)"
    )
    env = {**os.environ, "GITOPS_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
