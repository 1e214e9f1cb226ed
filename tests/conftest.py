"""Fixtures shared by the whole test suite. Keep it small; add fixtures with targeted edits."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitops.standin.testing import BOB_TOKEN, DEMO_ACCOUNTS, FULL_TOKEN, RESTRICTED_TOKEN, StandIn, running_standin


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[StandIn]:
    """The stand-in service on an ephemeral loopback port, with ``DEMO_ACCOUNTS``, a fresh SQLite file and a
    ``ManualClock`` (``standin.clock.advance(3600)`` moves it an hour)."""
    data = tmp_path / "standin"
    data.mkdir()
    with running_standin(DEMO_ACCOUNTS, data / "standin.sqlite3") as service:
        yield service


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system's temporary folder for this test alone: a leftover build checkout shows up here."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests marked `long` mostly wait (a socket kept open for a minute): run first, under xdist their wait overlaps
    # the rest of the suite instead of being its tail.
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


# --- The validated-manifest cache of every process the suite runs is a temporary folder, never ~/.cache. ---------
#
# Set for the whole session, before the first test, so that child processes inherit it; helpers that give a child a
# cleaned environment keep GITOPS_CACHE_DIR, and those that build one from nothing give it a temporary HOME. Tests
# of the cache itself point it at their own folder.


@pytest.fixture(scope="session", autouse=True)
def _manifest_cache_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    before = os.environ.get("GITOPS_CACHE_DIR")
    os.environ["GITOPS_CACHE_DIR"] = str(tmp_path_factory.mktemp("gitops-cache"))
    yield
    if before is None:
        os.environ.pop("GITOPS_CACHE_DIR", None)
    else:
        os.environ["GITOPS_CACHE_DIR"] = before


# --- The canary: no token may appear in any output, log, exception, ledger or plan file of the whole suite. ------
#
# Every test's captured stdout, stderr and log, and its failure text, are searched for the canary tokens; at the end
# of the session so is every file the tests left under pytest's temporary folder, except the files that hold tokens
# by design: the stand-in's accounts files and database (the server side), the credentials files a test wrote, and
# GitHub's own files where the runner has masked them (`::add-mask::` lines are how a token is masked).

CANARIES = (FULL_TOKEN, RESTRICTED_TOKEN, BOB_TOKEN)
_SERVER_SIDE = (".sqlite3", ".sqlite3-wal", ".sqlite3-shm", ".db")


def _leaks(text: str) -> list[str]:
    return [c[:6] + "..." for c in CANARIES if c in text]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if report.outcome != "passed":
        return
    for name, content in report.sections:
        leaked = _leaks("\n".join(line for line in content.splitlines() if "::add-mask::" not in line))
        if leaked:
            report.outcome = "failed"
            report.longrepr = f"a canary token ({', '.join(leaked)}) appeared in '{name}'"
            return


def _holds_tokens_by_design(path: Path, text: str) -> bool:
    if path.name.endswith(_SERVER_SIDE):
        return True
    # Accounts files of the stand-in and screepers credentials files written by tests.
    return text.lstrip().startswith(("users:", "servers:", '{"users"', "{'users'")) and path.suffix in (
        ".yaml",
        ".yml",
        ".json",
    )


@pytest.fixture(scope="session", autouse=True)
def _no_canary_left_in_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield
    base = tmp_path_factory.getbasetemp()
    found: list[str] = []
    for path in base.rglob("*"):
        if not path.is_file() or path.stat().st_size > 64 * 1024 * 1024:
            continue
        try:
            text = path.read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        if _holds_tokens_by_design(path, text):
            continue
        text = "\n".join(line for line in text.splitlines() if "::add-mask::" not in line)
        if _leaks(text):
            found.append(str(path.relative_to(base)))
    assert not found, f"a canary token was written to: {', '.join(sorted(found)[:20])}"


# --- The leak guard: the test that leaves a child process or an open file descriptor behind fails. ---------------
#
# Before each test the process's children and open descriptors are noted; after the test and all its function-scoped
# fixtures are torn down (this fixture is autouse, so it is set up first and torn down last), whatever is new is a
# leak of that test, and its teardown fails naming it. What session- or module-scoped fixtures hold was started
# before the note was taken (pytest sets up wider scopes first), so it is allowed; so are pytest's own descriptors,
# which it opened before the first test. A leaked child is killed and reaped once reported, so that one leak fails
# one test, not every later one; a leaked descriptor is left open (closing it under its owner could close a file
# opened later with the same number).


def _children() -> dict[int, str]:
    """This process's child processes: pid -> its state and command line."""
    me = os.getpid()
    pids: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{task}/children", encoding="ascii") as fh:
                pids.update(int(pid) for pid in fh.read().split())
    except FileNotFoundError:  # a kernel without /proc/PID/task/TID/children: read every process's parent
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                    pids.add(int(entry))
    found: dict[int, str] = {}
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace").rsplit(")", 1)[1].split()[0]
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError):
            continue  # ended (and reaped) in between
        found[pid] = f"pid {pid} ({'zombie, never waited for' if state == 'Z' else command or '?'})"
    return found


def _descriptors() -> dict[int, str]:
    """This process's open file descriptors: number -> what it is open on (a path, ``socket:[...]``, ``pipe:[...]``)."""
    found: dict[int, str] = {}
    fd_dir = f"/proc/{os.getpid()}/fd"
    for name in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue  # the descriptor listdir itself used, closed by now
        found[int(name)] = target
    return found


@pytest.fixture(scope="session", autouse=True)
def _process_wide_descriptors() -> None:
    """Open, before the first test, what libraries open once per process and keep for its life, so that the guard
    does not blame whichever test happens to come first. uvloop (the stand-in's event loop, through uvicorn): libuv
    opens a pipe on its first loop, as a lock for signal handling, and never closes it."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvicorn without its extras runs on asyncio's loop
        return
    uvloop.new_event_loop().close()


#: How long the guard waits for a server thread of a wider-scoped fixture to close its side of a connection that
#: the test's client closed, or for a child process to end, before it calls what is left a leak.
_GRACE_SECONDS = 2.0


def _folders(base: Path) -> set[str]:
    try:
        return {entry.name for entry in os.scandir(base) if entry.is_dir()}
    except OSError:
        return set()


@pytest.fixture(autouse=True)
def _no_leaks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    base = tmp_path_factory.getbasetemp()
    children, descriptors, folders = _children(), _descriptors(), _folders(base)
    yield
    # A file in a temporary folder that existed before the test was made by a wider-scoped fixture (a module's
    # stand-in, whose server threads each open their own SQLite connection when they first serve): the fixture
    # holds it across tests and closes it at its own teardown. The test's own tmp_path is made after this note.
    held = tuple(f"{base / name}{os.sep}" for name in folders)

    def leaks() -> tuple[dict[int, str], list[str]]:
        new_children = {pid: what for pid, what in _children().items() if pid not in children}
        new_fds = [
            f"fd {fd} -> {target}"
            for fd, target in sorted(_descriptors().items())
            if descriptors.get(fd) != target and not target.startswith(held)
        ]
        return new_children, new_fds

    deadline = time.monotonic() + _GRACE_SECONDS
    leaked_children, leaked_fds = leaks()
    while (leaked_children or leaked_fds) and time.monotonic() < deadline:
        time.sleep(0.02)
        leaked_children, leaked_fds = leaks()
    for pid in leaked_children:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    problems = []
    if leaked_children:
        problems.append("child process(es) still running: " + "; ".join(leaked_children.values()))
    if leaked_fds:
        problems.append("file descriptor(s) still open: " + "; ".join(leaked_fds))
    if problems:
        pytest.fail("this test leaked " + " and ".join(problems), pytrace=False)
