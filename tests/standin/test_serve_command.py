"""``gitops serve`` as a person (or a test suite) runs it: a subprocess on an ephemeral loopback port."""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from gitops.cli import run
from gitops.standin.testing import ALICE_EMAIL, ALICE_PASSWORD
from tests.standin.test_auth import ISSUE_ACCOUNTS


class Served:
    def __init__(self, proc: subprocess.Popen[str], banner: str, url: str) -> None:
        self.proc = proc
        self.banner = banner
        self.url = url

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str, str]:
        """Stop the server; its exit code, the rest of its output, and its log."""
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, out, err


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitops", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert proc.stdout is not None
        banner = ""
        while "Stop it with Ctrl-C." not in banner:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"gitops serve did not start: {banner}{proc.communicate()}")
            banner += line
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", banner)
        assert found is not None, banner
        yield Served(proc, banner, found.group(1))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_demo_makes_up_a_user_and_says_how_to_use_it() -> None:
    with serving("--demo") as served:
        token = re.search(r"token\s+([0-9a-f]{32}) \(full access\)", served.banner)
        password = re.search(r"username demo, password (\S+)", served.banner)
        data = re.search(r"state:\s+(\S+) \(temporary", served.banner)
        assert token is not None
        assert password is not None
        assert data is not None
        assert f"curl -H 'X-Token: {token.group(1)}' {served.url}/api/user/branches" in served.banner
        assert f"{served.url}/a/#!/account/auth-tokens/noratelimit?token={token.group(1)}" in served.banner
        assert Path(data.group(1)).exists()
        branches = httpx.get(served.url + "/api/user/branches", headers={"X-Token": token.group(1)}).json()
        assert [b["branch"] for b in branches["list"]] == ["default"]
        code = httpx.get(served.url + "/api/user/code", auth=("demo", password.group(1)))
        assert code.json() == {"ok": 1, "branch": "default", "modules": {"main": ""}}
        # Not in testing mode: no control routes.
        assert httpx.get(served.url + "/__standin__/now").status_code == 404
        exit_code, out, _ = served.stop()
    assert exit_code == 0
    assert "gitops serve: stopped." in out
    assert not Path(data.group(1)).exists()  # the temporary state went with the server


def test_accounts_file_data_file_and_logs_without_secrets(tmp_path: Path) -> None:
    accounts = tmp_path / "accounts.yaml"
    accounts.write_text(ISSUE_ACCOUNTS, encoding="utf-8")
    data = tmp_path / "state.sqlite3"
    env = {"GITOPS_SERVE_ACCOUNTS": str(accounts), "GITOPS_SERVE_DATA": str(data)}
    full, scoped = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
    with serving(env=env) as served:
        assert "accounts: 1 user(s), 2 token(s)" in served.banner
        with httpx.Client(base_url=served.url) as http:
            assert http.get("/api/user/code", params={"_token": full}).json()["ok"] == 1
            assert http.get("/api/user/code", headers={"X-Token": scoped}).json()["ok"] == 1
            assert http.get("/api/auth/query-token", params={"token": scoped}).json()["ok"] == 1
            assert http.get("/api/user/code", auth=(ALICE_EMAIL, ALICE_PASSWORD)).json()["ok"] == 1
            assert http.get("/api/user/code", params={"_token": "wrong-token-value"}).status_code == 401
        code, out, err = served.stop(signal.SIGTERM)
    assert code == 0
    assert "GET /api/user/code (alice) -> 200" in err
    assert "GET /api/user/code (-) -> 401" in err
    for secret in (full, scoped, full[:8], scoped[:8], ALICE_PASSWORD, "wrong-token-value"):
        assert secret not in served.banner + out + err
    assert data.exists()


def test_testing_mode_control_routes(tmp_path: Path) -> None:
    accounts = tmp_path / "accounts.yaml"
    accounts.write_text(ISSUE_ACCOUNTS, encoding="utf-8")
    full = {"X-Token": "0123456789abcdef0123456789abcdef"}
    with serving("--accounts", str(accounts), "--data", str(tmp_path / "s.sqlite3"), "--testing") as served:
        assert "testing:" in served.banner
        with httpx.Client(base_url=served.url) as http:
            now = http.get("/__standin__/now").json()["now"]
            first = http.get("/api/user/code", headers=full)
            # The window is kept in whole milliseconds (floor) and its reset is sent in whole seconds (ceiling).
            assert first.headers["x-ratelimit-reset"] == str(-(-math.floor(now * 1000) // 1000) + 3600)
            assert http.post("/__standin__/advance", json={"seconds": 3601}).json()["now"] == now + 3601
            # The hour has passed on the server's clock: a new window.
            assert http.get("/api/user/code", headers=full).headers["x-ratelimit-remaining"] == "59"
            assert http.post("/__standin__/fault", json={"endpoint": "GET /api/user/code", "kind": "500"}).json() == {
                "ok": 1
            }
            assert http.get("/api/user/code", headers=full).status_code == 500
            bad = http.post("/__standin__/fault", json={"endpoint": "GET /api/user/code", "kind": "boom"})
            assert bad.status_code == 400
            counted = http.get("/__standin__/count", params={"endpoint": "GET /api/user/code", "username": "alice"})
            assert counted.json() == {"ok": 1, "count": 3}
            http.post("/api/user/code", headers=full, json={"branch": "default", "modules": {"main": "m"}})
            stored = http.get("/__standin__/code", params={"username": "alice", "branch": "default"}).json()
            assert stored == {"ok": 1, "modules": {"main": "m"}}
            missing = http.get("/__standin__/code", params={"username": "alice", "branch": "nope"}).json()
            assert missing == {"ok": 1, "modules": None}
            branches = http.get("/__standin__/branches", params={"username": "alice"}).json()
            assert branches == {"ok": 1, "list": [{"branch": "default", "activeWorld": True, "activeSim": True}]}
        assert served.stop()[0] == 0


def test_an_acknowledged_upload_survives_a_kill(tmp_path: Path) -> None:
    args = ("--demo", "--data", str(tmp_path / "s.sqlite3"))
    with serving(*args) as served:
        token = re.search(r"token\s+([0-9a-f]{32})", served.banner)
        assert token is not None
        headers = {"X-Token": token.group(1)}
        modules = {f"m{i}": f"module {i}" for i in range(50)} | {"main": "kept"}
        answer = httpx.post(
            served.url + "/api/user/code", headers=headers, json={"branch": "default", "modules": modules}
        )
        assert answer.json()["ok"] == 1
        served.proc.kill()  # no chance to flush or close anything
        served.proc.communicate()
    # --demo makes up a new token each time: read the code with the new one.
    with serving(*args) as served:
        token = re.search(r"token\s+([0-9a-f]{32})", served.banner)
        assert token is not None
        got = httpx.get(served.url + "/api/user/code", headers={"X-Token": token.group(1)})
        assert got.json()["modules"] == modules
        served.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Error: give the users and tokens with --accounts FILE, or use --demo"),
        (["--accounts", "accounts.yaml"], "Error: give --data PATH"),
        (["--accounts", "missing.yaml", "--data", "x.sqlite3"], "Error: cannot read the accounts file missing.yaml"),
        (["--accounts", "bad.yaml", "--data", "x.sqlite3"], "bad.yaml:1: users: expected a non-empty list of users"),
        (["--demo", "--data", "not-sqlite.txt"], "is not a usable SQLite file"),
        (["--demo", "--port", "70000"], "Error: Invalid value for '--port'"),
    ],
)
def test_usage_errors(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("GITOPS_SERVE_ACCOUNTS", "GITOPS_SERVE_DATA", "GITOPS_SERVE_DEMO"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "accounts.yaml").write_text(ISSUE_ACCOUNTS, encoding="utf-8")
    (tmp_path / "bad.yaml").write_text("users: []\n", encoding="utf-8")
    (tmp_path / "not-sqlite.txt").write_text("this is not a database\n" * 100, encoding="utf-8")
    assert run(["serve", *args]) == 4
    assert message in capsys.readouterr().err


def test_a_port_in_use_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = run(["serve", "--demo", "--data", str(tmp_path / "s.sqlite3"), "--port", str(port)])
    assert code == 1
    err = capsys.readouterr().err
    assert f"Error: cannot listen on 127.0.0.1:{port}" in err
    assert "--port" in err
