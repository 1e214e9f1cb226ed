"""The leak guard of tests/conftest.py fails the test that leaves a child process or an open file behind (not a
later one), and allows what wider-scoped fixtures hold. Shown on inner test runs (pytest's ``pytester``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

INNER = """
import os
import subprocess
import sys

import pytest

KEPT = []


@pytest.fixture(scope="session")
def session_file():
    # Held across tests on purpose, opened before the test that first asks for it: allowed.
    with open(os.devnull, encoding="utf-8") as fh:
        yield fh


def test_leaks_a_child():
    KEPT.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))


def test_leaks_a_file():
    KEPT.append(open(os.devnull, encoding="utf-8"))


def test_cleans_up():
    with subprocess.Popen([sys.executable, "-c", "pass"]) as child, open(os.devnull, encoding="utf-8"):
        child.wait()


def test_uses_the_session_file(session_file):
    assert session_file.read() == ""


def test_runs_after_the_leaks():
    pass
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest("from tests.conftest import _no_leaks  # noqa: F401\n")
    pytester.makepyfile(test_inner=INNER)
    return pytester


def test_the_test_that_leaks_fails_and_no_other(inner: pytest.Pytester) -> None:
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", "-rA", timeout=120)
    # The leak fails the teardown of the test that leaked (an error reported against that test); the tests after it
    # pass, and so do the test that cleans up and the one using what a session fixture holds.
    result.assert_outcomes(passed=5, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaks_a_child*",
            "this test leaked child process(es) still running: pid * (*python -c import time; time.sleep(60))",
            "*ERROR at teardown of test_leaks_a_file*",
            "this test leaked file descriptor(s) still open: fd * -> /dev/null",
        ]
    )
    assert [line.split(" - ")[0] for line in result.outlines if line.startswith("ERROR ")] == [
        "ERROR test_inner.py::test_leaks_a_child",
        "ERROR test_inner.py::test_leaks_a_file",
    ]
