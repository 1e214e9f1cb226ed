"""Fixtures shared by the whole test suite. Keep it small; add fixtures with targeted edits."""

from __future__ import annotations

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
