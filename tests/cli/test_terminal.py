"""The CLI at a real terminal (a pseudo-terminal): apply asks before it writes, a budget refusal shows the whole
no-rate-limit link. The command runs as its own process against the stand-in over loopback."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn
from tests.project import Project, one_branch_project, spend

UPLOAD = "POST /api/user/code"


def at_terminal(project: Project, args: list[str], answer: bytes | None = None, timeout: float = 60) -> tuple[int, str]:
    """Run ``gitops ARGS`` with stdin, stdout and stderr on a pseudo-terminal; type ``answer`` at the prompt."""
    primary, secondary = pty.openpty()
    env = {**os.environ, "SCREEPS_TOKEN": FULL_TOKEN, "NO_COLOR": "1", "TERM": "xterm"}
    argv = [sys.executable, "-m", "gitops", *args, "-m", str(project.root / "gitops.yaml")]
    argv += ["--state-dir", str(project.state_dir)]
    proc = subprocess.Popen(argv, stdin=secondary, stdout=secondary, stderr=secondary, env=env, cwd=project.root)
    os.close(secondary)
    output = b""
    deadline = time.monotonic() + timeout
    answered = answer is None
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(primary, 65536)
                except OSError:  # the other end closed: the command is done
                    break
                if not chunk:
                    break
                output += chunk
            if not answered and b"Apply this plan? [y/N]" in output:
                assert answer is not None
                os.write(primary, answer)
                answered = True
            if proc.poll() is not None and not ready:
                break
    finally:
        os.close(primary)
    code = proc.wait(timeout=30)
    return code, output.decode("utf-8", "replace").replace("\r\n", "\n")


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    return one_branch_project(tmp_path, standin, capsys, monkeypatch)


def test_apply_at_a_terminal_asks_and_no_means_nothing_is_written(project: Project, standin: StandIn) -> None:
    code, screen = at_terminal(project, ["apply"], answer=b"n\n")
    assert code == 1
    assert "Apply this plan? [y/N]: n\nApply cancelled; nothing was changed.\n" in screen
    assert standin.count(UPLOAD) == 0
    assert standin.branch_modules(ALICE, "main") is None


def test_apply_at_a_terminal_asks_and_yes_applies(project: Project, standin: StandIn) -> None:
    code, screen = at_terminal(project, ["apply"], answer=b"y\n")
    assert code == 0, screen
    assert "Applied: 1 branch(es) changed with 0 upload(s)" in screen  # created holding its modules
    assert (standin.branch_modules(ALICE, "main") or {})["main"] == "module.exports.loop = () => {};\n"


def test_a_budget_refusal_at_a_terminal_shows_the_whole_link(project: Project, standin: StandIn) -> None:
    assert project.apply("--yes").code == 0
    spend(standin, UPLOAD, 239)
    standin.clock.advance(60)
    project.write({"src/main.js": "// v1\n"})
    assert project.apply("--yes").code == 0  # the 240th: the ledger now knows none remain
    project.write({"src/main.js": "// next\n"})
    code, screen = at_terminal(project, ["plan"])
    assert code == 3
    link = f"{standin.url}/a/#!/account/auth-tokens/noratelimit?token={FULL_TOKEN}"
    assert f"No-rate-limit link for server 'local' (open it, press Proceed): {link}\n" in screen
    # Off the terminal the same refusal hides the token (the test's own capture is not a terminal).
    refused = project.plan()
    assert refused.code == 3
    assert FULL_TOKEN not in refused.err
    assert "noratelimit?token=<hidden>" in refused.err
