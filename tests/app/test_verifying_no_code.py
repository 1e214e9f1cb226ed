"""``verify:`` against a server that runs no code (issue 46, point 4): ``gitops serve``, the stand-in players try first,
sends empty ticks whatever the bot does, so a bot that throws every tick must come out UNKNOWN, never HEALTHY. The
real ``gitops serve --demo`` in a subprocess on loopback, the real CLI, a real git repository; the stand-in says
what it is in ``GET /api/version`` (``standin: true``, ``runsCode: false``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from gitops.cli import run
from tests.standin.test_serve_command import serving

THROWS = "module.exports.loop = () => { throw new Error('fails every tick'); };\n"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_verify_against_gitops_serve_is_unknown_not_healthy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = tmp_path / "bot"
    (bot / "src").mkdir(parents=True)
    (bot / "src" / "main.js").write_text(THROWS, encoding="utf-8")
    with serving("--demo") as served:
        token = re.search(r"token\s+([0-9a-f]{32}) \(full access\)", served.banner)
        assert token is not None
        version = httpx.get(served.url + "/api/version").json()
        assert (version["standin"], version["runsCode"], version["console"]) == (True, False, "empty")
        manifest = {
            "version": 1,
            "servers": {"local": {"url": served.url, "token_env": "SCREEPS_TOKEN"}},
            "branches": [
                {
                    "server": "local",
                    "branch": "main",
                    "root": "src",
                    "activate": ["world"],
                    "verify": {"ticks": 2, "timeout": 20, "on_failure": "rollback"},
                }
            ],
        }
        (bot / "gitops.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
        _git(bot, "init", "-q")
        _git(bot, "add", "-A")
        _git(bot, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "a bot that throws")
        monkeypatch.setenv("SCREEPS_TOKEN", token.group(1))
        monkeypatch.setenv("NO_COLOR", "1")
        capsys.readouterr()
        code = run(["apply", "--yes", "-m", str(bot / "gitops.yaml"), "--state-dir", str(tmp_path / "state")])
        out, err = capsys.readouterr()
        served.stop()
    assert code == 0, out + err
    assert "verify local/main: UNKNOWN" in out + err
    assert "stand-in (gitops serve), which runs no code" in out + err
    assert "HEALTHY" not in out + err
