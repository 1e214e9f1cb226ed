"""Signs of life (issue 20, item 1): a wait over a second says what is awaited, live on a terminal's stderr, in plain
lines without one; stdout (and --json) stays clean."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitops.edges.ledger import Ledger
from gitops.render.progress import Progress
from gitops.standin.testing import StandIn
from tests.project import Project

LIST = "GET /api/user/branches"


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    p = Project(tmp_path / "bot", standin, capsys, monkeypatch)
    p.write({"src/main.js": "module.exports.loop = () => {};\n"})
    p.manifest([{"branch": "default", "root": "src"}])
    p.commit()
    return p


def _argv(project: Project, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gitops",
        "plan",
        "-m",
        str(project.root / "gitops.yaml"),
        "--state-dir",
        str(project.state_dir),
        *extra,
    ]


def test_a_slow_answer_is_announced_in_plain_lines_without_a_terminal(project: Project, standin: StandIn) -> None:
    standin.inject_fault(LIST, "delay", delay=2.5)
    done = subprocess.run(
        _argv(project, "--json"),
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "waiting for server 'local' to answer GET /api/user/branches (1 s so far)" in done.stderr
    assert "\r" not in done.stderr
    assert done.stdout.lstrip().startswith("{")  # the JSON document alone
    assert "waiting" not in done.stdout


def test_a_slow_answer_is_a_live_status_line_at_a_terminal(project: Project, standin: StandIn) -> None:
    standin.inject_fault(LIST, "delay", delay=2.5)
    primary, secondary = pty.openpty()
    with subprocess.Popen(
        _argv(project), stdout=subprocess.PIPE, stderr=secondary, env={**os.environ, "NO_COLOR": "1"}
    ) as proc:
        os.close(secondary)
        seen = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        os.close(primary)
        assert proc.stdout is not None
        out = proc.stdout.read().decode()
        assert proc.wait(timeout=60) == 2
    text = seen.decode()
    assert "\r\x1b[Kwaiting for server 'local' to answer GET /api/user/branches (1 s)" in text
    assert "(2 s)" in text
    assert text.rstrip().endswith("\x1b[K")  # cleared once the answer came
    assert "waiting" not in out


def test_a_lock_held_by_another_run_is_announced_with_its_owner(project: Project, tmp_path: Path) -> None:
    from gitops.edges.clock import SystemClock

    first = subprocess.run(_argv(project), capture_output=True, text=True, timeout=60, check=False)
    assert first.returncode == 2, first.stderr
    [path] = [p for p in project.state_dir.rglob("*.json") if p.parent.name != "ledger"]
    server_url = project.service.url
    fingerprint = path.stem
    holder = Ledger.open(project.state_dir, server_url, fingerprint, clock=SystemClock(), lock_wait=1)
    try:
        started = time.monotonic()
        done = subprocess.run(
            _argv(project),
            env={**os.environ, "GITOPS_LOCK_WAIT": "3"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        took = time.monotonic() - started
    finally:
        holder.close()
    assert done.returncode == 1
    assert "waiting for the ledger" in done.stderr
    assert "locked by another gitops run (pid" in done.stderr
    assert "(up to 3 s)" in done.stderr
    assert took >= 3


def test_a_short_wait_shows_nothing_and_waits_in_threads_share_the_line() -> None:
    quiet = io.StringIO()
    progress = Progress(quiet, live=False)
    with progress.waiting("a quick answer"):
        time.sleep(0.1)
    assert quiet.getvalue() == ""
    live = io.StringIO()
    progress = Progress(live, live=True)
    with progress.waiting("server 'a'"), progress.waiting("server 'b'"):
        time.sleep(1.4)
    assert "waiting for server 'a' (1 s); server 'b' (1 s)" in live.getvalue()
