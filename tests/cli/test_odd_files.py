"""Odd input files and odd secrets (issue 18, item 5): no crash, no hang, the usual ``file:line`` error."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitops.cli import run
from gitops.secrets import HIDDEN, Secret, leaked_in, redact
from tests.factories import write_files

MANIFEST = (
    "version: 1\n"
    "servers:\n  a: {url: 'http://127.0.0.1:9', token_env: T}\n"
    "branches:\n  - {server: a, branch: main, root: src}\n"
)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITOPS_MANIFEST", raising=False)
    write_files(tmp_path, {"src/main.js": "module.exports.loop = () => {};\n"})
    return tmp_path


@pytest.mark.parametrize("char", ["\x01", "\x00", "\x1b", "\x7f", "\x9f"])
@pytest.mark.parametrize("where", ["comment", "value", "key"])
def test_a_control_character_anywhere_is_a_file_line_error(
    here: Path, capsys: pytest.CaptureFixture[str], char: str, where: str
) -> None:
    text = {
        "comment": MANIFEST.replace("servers:\n", f"# note {char}\nservers:\n"),
        "value": MANIFEST.replace("branch: main", f"branch: ma{char}in"),
        "key": MANIFEST.replace("root: src", f"ro{char}ot: src"),
    }[where]
    (here / "gitops.yaml").write_text(text, encoding="utf-8")
    assert run(["validate"]) == 5
    err = capsys.readouterr().err
    assert f"the control character U+{ord(char):04X} is not allowed in YAML" in err
    assert "gitops.yaml:" in err
    assert "Traceback" not in err
    assert "internal error" not in err


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_manifest_that_is_no_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    manifest = tmp_path / "bot.yaml"
    if kind == "fifo":
        os.mkfifo(manifest)
    else:
        manifest.mkdir()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gitops", "validate", "-m", str(manifest)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert time.monotonic() - started < 30  # it never waits for a writer
    assert done.returncode in (4, 5), done.stderr
    assert "Traceback" not in done.stderr
    assert ("FIFO" in done.stderr) if kind == "fifo" else ("directory" in done.stderr or "folder" in done.stderr)


def test_an_accounts_file_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    from gitops.standin.accounts import AccountsError, load_accounts

    accounts = tmp_path / "accounts.yaml"
    os.mkfifo(accounts)
    with pytest.raises(AccountsError) as caught:
        load_accounts(accounts)
    assert "a FIFO (named pipe), not a regular file" in str(caught.value)


@pytest.mark.parametrize("length", [400, 500, 2_000, 10_000])
def test_secrets_of_any_length_are_redacted_without_recursion(length: int) -> None:
    token = ("abcdef0123456789" * (length // 16 + 1))[:length]
    password = "p@ss w0rd/" * (length // 10)
    Secret(token)
    Secret(password)
    text = f"token={token}&x=1 Authorization: {password} end"
    started = time.monotonic()
    shown = redact(text)
    assert token not in shown
    assert password not in shown
    assert shown.count(HIDDEN) >= 2
    assert shown.endswith(" end")
    assert leaked_in(f"module.exports.t = '{token}';")
    assert time.monotonic() - started < 10
