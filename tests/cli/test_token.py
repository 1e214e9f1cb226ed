"""``gitops token`` and ``gitops unlock`` through the real CLI against the real stand-in over loopback."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops.cli import run
from gitops.edges.clock import ManualClock
from gitops.inert import inert
from gitops.standin.testing import DEMO_ACCOUNTS, FULL_TOKEN, RESTRICTED_TOKEN, StandIn, running_standin
from tests.hostile import answer, hostile_server

START = 1_800_000_000.0


def write_manifest(folder: Path, servers: dict[str, dict[str, str]]) -> Path:
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "src" / "main.js").write_text("module.exports.loop = () => {};\n")
    first = next(iter(servers))
    data: dict[str, Any] = {
        "version": 1,
        "servers": servers,
        "branches": [{"server": first, "branch": "main", "root": "src"}],
    }
    path = folder / "gitops.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class Cli:
    """Runs ``gitops`` in-process with the stand-in's clock; returns (exit code, stdout, stderr)."""

    def __init__(self, folder: Path, standin: StandIn, capsys: pytest.CaptureFixture[str]) -> None:
        self.folder = folder
        self.standin = standin
        self.capsys = capsys
        self.manifest = write_manifest(folder, {"official": {"url": standin.url, "token_env": "SCREEPS_TOKEN"}})

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = run(
            [*args, "-m", str(self.manifest), "--state-dir", str(self.folder / "state")], clock=self.standin.clock
        )
        out, err = self.capsys.readouterr()
        return code, out, err


@pytest.fixture
def cli(tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("SCREEPS_TOKEN", FULL_TOKEN)
    for name in ("GITOPS_MANIFEST", "GITOPS_SERVER", "GITOPS_SERVERS", "GITOPS_STATE_DIR", "GITOPS_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    return Cli(tmp_path / "project", standin, capsys)


def test_token_full_access(cli: Cli) -> None:
    code, out, err = cli("token")
    assert (code, err) == (0, "")
    assert out == (
        f"Server 'official' ({cli.standin.url}), token from the environment variable SCREEPS_TOKEN:\n"
        "  scope:     full access\n"
        "  plan:      ok\n"
        "  apply:     ok\n"
        "  unlimited: no; rate limits apply ('gitops unlock' lifts them for two hours)\n"
    )


def test_token_restricted_and_unlimited(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCREEPS_TOKEN", RESTRICTED_TOKEN)
    until = cli.standin.grant_unlimited(RESTRICTED_TOKEN)
    cli.standin.clock.advance(1800)
    code, out, _ = cli("token")
    assert code == 0
    assert "  scope:     restricted (endpoints: GET /api/user/code, POST /api/user/code)\n" in out
    assert (
        "  plan:      ok (without GET /api/user/branches, apply re-sends activation every time)\n"
        "  apply:     needs POST /api/user/clone-branch, POST /api/user/set-active-branch\n"
    ) in out
    assert "  unlimited: until 2027-01-15 10:00 UTC (1 h 30 min left); no rate limits apply\n" in out
    code, out, _ = cli("token", "--json")
    doc = json.loads(out)
    assert doc["unlimited_until"] == until
    assert doc["unlimited_seconds"] == 5400
    assert doc["apply_missing"] == ["POST /api/user/clone-branch", "POST /api/user/set-active-branch"]
    assert doc["plan_missing"] == []


def test_token_without_the_secret(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCREEPS_TOKEN")
    code, out, err = cli("token")
    assert (code, out) == (7, "")
    assert err.startswith(
        "Error: no credentials for server 'official': the environment variable SCREEPS_TOKEN is not set.\n"
    )


def test_token_refused(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCREEPS_TOKEN", "canarywrong0123456789abcdef012345")
    code, _, err = cli("token")
    assert code == 1
    assert err == "Error: server 'official' refused GET /api/auth/query-token: token not found\n"


def test_several_servers_need_a_choice(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    write_manifest(
        cli.folder,
        {
            "official": {"url": cli.standin.url, "token_env": "SCREEPS_TOKEN"},
            "local": {"url": "http://127.0.0.1:9", "username_env": "U", "password_env": "P"},
        },
    )
    code, _, err = cli("unlock")
    assert code == 4
    assert err == (
        "Error: the manifest has several servers (local, official); choose one with --server NAME "
        "(or GITOPS_SERVERS).\n"
    )
    # One name per variable: --server reads GITOPS_SERVERS for token and unlock as for plan; the singular is refused.
    monkeypatch.setenv("GITOPS_SERVERS", "nope")
    code, _, err = cli("unlock")
    assert (code, err) == (4, "Error: the manifest has no server 'nope'; its servers are: local, official.\n")
    monkeypatch.setenv("GITOPS_SERVER", "official")
    code, _, err = cli("token")
    assert code == 4
    assert err.startswith("Error: the environment variable GITOPS_SERVER is set, but it is not read: --server reads ")
    assert "Rename it to GITOPS_SERVERS" in err
    monkeypatch.delenv("GITOPS_SERVER")
    monkeypatch.delenv("GITOPS_SERVERS")
    code, _, err = cli("unlock", "--server", "nope")
    assert (code, err) == (4, "Error: the manifest has no server 'nope'; its servers are: local, official.\n")
    code, _, err = cli("token", "--server", "local")
    assert code == 7
    assert err.startswith("Error: no credentials for server 'local': the environment variable U is not set")
    monkeypatch.setenv("U", "alice")
    monkeypatch.setenv("P", "pw-token-cli-0001")
    code, _, err = cli("token", "--server", "local")
    assert code == 7
    assert err.startswith(
        "Error: The token query is only for persistent tokens, and server 'local' is not used with one.\n"
    )


def test_unlock_redacts_the_link_off_a_terminal(cli: Cli) -> None:
    code, out, err = cli("unlock")
    assert (code, err) == (0, "")
    assert out == (
        'Open this link in a browser and press "Proceed" to lift every rate limit of the token for server '
        "'official' for two hours:\n"
        f"{cli.standin.url}/a/#!/account/auth-tokens/noratelimit?token=<hidden>\n"
        "(The token in the link is shown as <hidden> because standard output is not an interactive terminal, and "
        "logs keep what is printed. Run 'gitops unlock' in a terminal to see the whole link.)\n"
    )
    assert cli.standin.count("GET /api/auth/query-token") == 0  # the link is built locally


def test_unlock_shows_the_whole_link_on_a_terminal(cli: Cli) -> None:
    primary, secondary = pty.openpty()
    env = {**os.environ, "SCREEPS_TOKEN": FULL_TOKEN, "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitops", "unlock", "-m", str(cli.manifest), "--state-dir", str(cli.folder / "s")],
        stdout=secondary,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(secondary)
    output = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the terminal's other end closed: the command is done
            break
        if not chunk:
            break
        output += chunk
    os.close(primary)
    assert proc.wait(timeout=60) == 0
    assert proc.stderr is not None
    proc.stderr.close()
    text = output.decode().replace("\r\n", "\n")
    assert f"{cli.standin.url}/a/#!/account/auth-tokens/noratelimit?token={FULL_TOKEN}\n" in text
    assert "<hidden>" not in text


class GrantingClock(ManualClock):
    """The person presses "Proceed" while the tool waits: on the ``grant_at``-th sleep, the token is unlimited."""

    def __init__(self, grant_at: int) -> None:
        super().__init__(START)
        self.grant_at = grant_at
        self.standin: StandIn | None = None

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if len(self.slept) == self.grant_at and self.standin is not None:
            self.standin.grant_unlimited(FULL_TOKEN)


@pytest.fixture
def granting(tmp_path: Path) -> Iterator[StandIn]:
    clock = GrantingClock(grant_at=3)
    (tmp_path / "db").mkdir()
    with running_standin(DEMO_ACCOUNTS, tmp_path / "db" / "standin.sqlite3", clock) as service:
        clock.standin = service
        yield service


def test_unlock_waits_until_unlimited(
    tmp_path: Path, granting: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCREEPS_TOKEN", FULL_TOKEN)
    cli = Cli(tmp_path / "project", granting, capsys)
    code, out, err = cli("unlock", "--wait", "--poll-seconds", "5", "--timeout", "60")
    assert code == 0, err
    assert out.endswith("The token for server 'official' is unlimited until 2027-01-15 10:00 UTC (2 h 0 min left).\n")
    assert "Waiting until the token is unlimited (asking every 5 s, for at most 60 s) ..." in err
    assert granting.count("GET /api/auth/query-token") == 4
    assert isinstance(granting.clock, GrantingClock)
    assert granting.clock.slept == [5.0, 5.0, 5.0]
    ledger_text = "".join(p.read_text() for p in (cli.folder / "state").rglob("*.json"))
    assert '"unlimited_until":1800007215.0' in ledger_text.replace(" ", "")
    assert FULL_TOKEN not in out + err + ledger_text


def test_unlock_wait_gives_up(cli: Cli) -> None:
    code, _, err = cli("unlock", "--wait", "--poll-seconds", "10", "--timeout", "25")
    assert code == 1
    assert err.endswith(
        "Error: the token for server 'official' is still rate limited after waiting 25 s.\n"
        "Open the link, press \"Proceed\", then run 'gitops unlock --wait' again (or plan and apply: the budget "
        "check shows what fits now).\n"
    )
    assert cli.standin.count("GET /api/auth/query-token") == 4
    assert cli.standin.clock.slept == [10.0, 10.0, 5.0]


def test_token_shows_the_servers_names_of_endpoints_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: the scope's names are the server's text: an escape sequence, a workflow command and a
    bidirectional override in them are shown as escapes, in the text and in the JSON."""
    hostile = "GET /api/\u202etxt.js\x1b]0;pwned\x07\n::add-mask::x"
    body = json.dumps({"ok": 1, "token": {"full": False, "endpoints": {hostile: True}, "websockets": {}}})
    monkeypatch.setenv("SCREEPS_TOKEN", FULL_TOKEN)
    with hostile_server(answer(body.encode())) as server:
        manifest = write_manifest(tmp_path, {"official": {"url": server.url, "token_env": "SCREEPS_TOKEN"}})
        capsys.readouterr()
        outputs = []
        for extra in ([], ["--json"]):
            code = run(["token", *extra, "-m", str(manifest), "--state-dir", str(tmp_path / "state")])
            out, _ = capsys.readouterr()
            assert code == 0, out
            outputs.append(out)
    text, document = outputs
    assert inert(hostile, one_line=True) in text, text
    assert not {"\x1b", "\x07", "\u202e"} & set(text + document)
    assert not [line for line in text.splitlines() if line.lstrip().startswith("::")]
    assert json.loads(document)["endpoints"] == [hostile], "the JSON keeps the name, escaped as JSON escapes it"
