"""Issue 41: help pages that are current (exit codes from the one list), Markdown, paged at a terminal, with links that
work where the tool is installed, and `help COMMAND` pointing at the command's own help."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gitops.cli import run
from gitops.cli.help import TOPICS, installed_links, topic_text
from gitops.errors import EXIT_CODE_MEANINGS, ExitCode
from tests.test_errors import readme_exit_codes


def test_every_exit_code_has_one_meaning_and_the_page_and_readme_list_them_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert set(EXIT_CODE_MEANINGS) == set(ExitCode)
    assert run(["help", "exit-codes"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("# Exit codes of gitops\n\n| exit code | meaning |\n|---|---|\n")
    listed = [int(m) for m in re.findall(r"^\| (\d+) \|", page, re.M)]
    assert listed == [*sorted(int(c) for c in ExitCode), 130]
    assert set(readme_exit_codes()) == {int(c) for c in ExitCode}
    assert "`plan` has changes to apply, `drift` found" in page  # 2 is not plan-only


def test_no_page_links_to_a_file_a_pip_install_does_not_have() -> None:
    for topic in TOPICS:
        text = topic_text(topic)
        assert text is not None, topic
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            assert target.startswith(("http://", "https://", "#")), f"{topic}: link to {target}"


def test_links_become_help_topics_or_repository_paths() -> None:
    text = "See [the manifest](manifest.md#build), [plan.yml](../examples/workflows/plan.yml) and [x](https://a.b)."
    assert installed_links(text) == (
        "See the manifest (gitops help manifest, section 'build'), plan.yml (in the screeps-gitops repository) "
        "and [x](https://a.b)."
    )


def test_help_of_a_command_is_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["help", "plan"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: gitops plan [OPTIONS]")
    assert "'plan' is a command: this is 'gitops plan --help'." in out
    assert run(["help", "nothing-like-it"]) == ExitCode.USAGE


def test_a_long_page_goes_through_the_pager_at_a_terminal(tmp_path: Path) -> None:
    marker = tmp_path / "paged"
    pager = tmp_path / "pager.sh"
    pager.write_text(f"#!/bin/sh\ncat > {marker}\n", "utf-8")
    pager.chmod(0o755)
    env = {**os.environ, "PAGER": str(pager), "LINES": "20", "COLUMNS": "100", "NO_COLOR": "1"}
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gitops", "help", "manifest"],
            stdin=secondary,
            stdout=secondary,
            stderr=subprocess.PIPE,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        os.close(secondary)
        os.close(primary)
    assert done.returncode == 0, done.stderr
    assert marker.read_text("utf-8").startswith("# The manifest")
    # Not at a terminal (a pipe, a CI log): printed plainly, no pager.
    marker.unlink()
    piped = subprocess.run(
        [sys.executable, "-m", "gitops", "help", "manifest"], capture_output=True, env=env, timeout=60, check=False
    )
    assert piped.returncode == 0
    assert piped.stdout.decode().startswith("# The manifest")
    assert not marker.exists()
