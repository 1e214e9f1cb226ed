"""What the real private server (screeps 4.3.0 + screepsmod-auth 2.7.2) answers: the facts our client relies on.

These tests use only the harness and raw httpx, so they hold whatever state ``gitops.edges.service`` is in. Each fact is
written down in ``docs/private-server-facts.md``; when a test here fails, the server changed and so must the doc.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gitops.core.codeset import code_length
from gitops.standin.testing import FULL_TOKEN, StandIn
from tests.private import harness
from tests.private.harness import ROOT, SCRIPT, PrivateServer, ServerUser, install_problem

pytestmark = pytest.mark.private_server

FIVE_MB = 5 * 1024 * 1024
BODY_LIMIT = 8 * 1024 * 1024
TOKEN = re.compile(r"^[0-9a-f]{40}$")
GUARD = ROOT / "scripts" / "private-server" / "loopback-guard.js"


def auth(user: ServerUser, token: str) -> dict[str, str]:
    return {"X-Token": token, "X-Username": user.username}


def signin_token(server: PrivateServer, login: str, password: str) -> str:
    response = server.http.post("/api/auth/signin", json={"email": login, "password": password})
    assert response.status_code == 200, response.text
    token = response.json()["token"]
    assert isinstance(token, str)
    return token


def post_code(user: ServerUser, body: bytes) -> httpx.Response:
    """POST /api/user/code with a body exactly as given (UTF-8 JSON, like our client sends it)."""
    token = user.signin()
    return user.server.http.post(
        "/api/user/code", content=body, headers={**auth(user, token), "Content-Type": "application/json"}
    )


def utf8_json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# --- the harness itself: start, loopback only, stop ---


def test_server_answers_version_and_names_its_auth_mod(private_server: PrivateServer) -> None:
    version = private_server.http.get("/api/version")
    assert version.status_code == 200
    body = version.json()
    assert body["ok"] == 1
    assert body["packageVersion"] == "4.3.0"
    assert body["useNativeAuth"] is False
    # The count of active users with CPU: which users are active depends on what ran before in this world.
    assert isinstance(body["users"], int)
    assert body["protocol"] == 14
    authmod = private_server.http.get("/api/authmod").json()
    assert authmod["ok"] == 1
    assert authmod["name"] == "screepsmod-auth"
    assert authmod["version"] == "2.7.2"
    assert authmod["allowRegistration"] is True
    taken = private_server.http.post(
        "/api/register/submit",
        json={"username": private_server.username, "email": "other@example.invalid", "password": "x"},
    )
    assert taken.status_code == 200
    assert taken.json()["error"].startswith("Error: User already exists\n    at ")
    assert private_server.started_in is not None
    assert private_server.started_in < 30


def test_server_holds_only_loopback_sockets(private_server: PrivateServer) -> None:
    private_server.signin()  # some traffic first, so the check sees a busy server
    report = private_server.sockets()
    listening = {line.split()[1] for line in report.inspected if "LISTEN" in line}
    assert f"127.0.0.1:{private_server.port}" in listening
    assert f"127.0.0.1:{private_server.cli_port}" in listening
    assert report.violations == [], "\n".join(report.inspected)


def test_steam_call_is_stubbed_and_nothing_was_blocked(private_server: PrivateServer) -> None:
    logs = private_server.logs()
    assert "[loopback-guard] Steam Web API stubbed" in logs
    assert "Steam Web API connection error" not in logs
    assert "[loopback-guard] blocked" not in logs, private_server.log_tail()


def test_loopback_guard_refuses_outside_connections_and_lookups(tmp_path: Path) -> None:
    script = tmp_path / "probe.js"
    script.write_text(
        """
        const net = require('net'), dns = require('dns');
        const out = [];
        const done = () => { if (out.length === 4) { console.log(JSON.stringify(out.sort())); } };
        net.connect(80, '192.0.2.1').on('error', e => { out.push('tcp:' + e.code); done(); });
        dns.lookup('example.invalid', e => { out.push('dns:' + (e && e.code)); done(); });
        dns.promises.lookup('example.invalid').catch(e => { out.push('dnsp:' + e.code); done(); });
        net.connect(1, '127.0.0.1').on('error', e => { out.push('loopback:' + e.code); done(); });
        """
    )
    result = subprocess.run(
        ["node", "--require", str(GUARD), str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["dns:ENOTFOUND", "dnsp:ENOTFOUND", "loopback:ECONNREFUSED", "tcp:ECONNREFUSED"]
    assert "[loopback-guard] blocked a connection to 192.0.2.1:80" in result.stderr
    assert "[loopback-guard] blocked a DNS lookup of example.invalid" in result.stderr


def test_stop_ends_the_whole_process_group_and_removes_the_world() -> None:
    server = PrivateServer.start()
    try:
        members = server.members()
        # launcher, storage, backend, engine main, runner, processor (and the harness's watcher)
        assert len(members) >= 6, members
        data_dir = server.data_dir
        assert (data_dir / "db.json").exists()
    finally:
        server.stop()
    assert not any(Path(f"/proc/{pid}").exists() and _alive(pid) for pid in members)
    assert not data_dir.exists()


def test_start_moves_to_other_ports_when_one_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken: int = blocker.getsockname()[1]
        real_free_port = harness.free_port
        first = iter([taken])
        monkeypatch.setattr(harness, "free_port", lambda: next(first, 0) or real_free_port())
        server = PrivateServer.start()
        try:
            assert server.port != taken
            assert server.http.get("/api/version").json()["ok"] == 1
        finally:
            server.stop()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_missing_install_is_an_error_that_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVATE_SERVER_DIR", str(tmp_path / "nowhere"))
    problem = install_problem()
    assert problem is not None
    assert "not installed" in problem
    assert "bash scripts/private-server.sh install" in problem
    # The fixture turns that into an error, never a skip: run one test of this file in a child pytest.
    env = {**os.environ, "PRIVATE_SERVER_DIR": str(tmp_path / "nowhere")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{Path(__file__).relative_to(ROOT)}::test_server_answers_version_and_names_its_auth_mod",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1, result.stdout
    assert "1 error" in result.stdout
    assert "skipped" not in result.stdout
    assert "bash scripts/private-server.sh install" in result.stdout


def test_script_check_and_usage() -> None:
    check = subprocess.run(["bash", str(SCRIPT), "check"], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr
    assert os.access(SCRIPT, os.X_OK), "scripts/test.sh runs the install only when the script is executable"
    usage = subprocess.run(["bash", str(SCRIPT), "bogus"], capture_output=True, text=True, check=False)
    assert usage.returncode == 2
    assert "install" in usage.stdout


# --- sign-in and tokens ---


def test_signin_with_username_and_with_email(private_server: PrivateServer) -> None:
    for login in (private_server.username, private_server.email):
        response = private_server.http.post(
            "/api/auth/signin", json={"email": login, "password": private_server.password}
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json; charset=utf-8"
        body = response.json()
        assert set(body) == {"ok", "token"}
        assert body["ok"] == 1
        assert TOKEN.match(body["token"])
        assert "x-token" not in response.headers  # the token is in the body here
    # HTTP Basic works on the sign-in route as well.
    basic = private_server.http.post("/api/auth/signin", auth=(private_server.username, private_server.password))
    assert basic.status_code == 200
    assert basic.json()["ok"] == 1


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        pytest.param({"email": "GitopsTester", "password": "wrong"}, 401, "Unauthorized", id="wrong-password"),
        pytest.param({"email": "gitops-tester@example.invalid", "password": "x"}, 401, "Unauthorized", id="email"),
        pytest.param({"email": "nobody", "password": "x"}, 401, "Unauthorized", id="unknown-user"),
        pytest.param({"username": "GitopsTester", "password": "x"}, 400, "Bad Request", id="username-field"),
        pytest.param({}, 400, "Bad Request", id="empty"),
    ],
)
def test_signin_failures_are_plain_text(
    private_server: PrivateServer, body: dict[str, str], status: int, text: str
) -> None:
    response = private_server.http.post("/api/auth/signin", json=body)
    assert response.status_code == status
    assert response.text == text
    assert "content-type" not in response.headers
    assert "x-token" not in response.headers
    if status == 401:
        assert response.headers["www-authenticate"] == ""


def test_signin_user_name_is_case_sensitive(private_server: PrivateServer) -> None:
    response = private_server.http.post(
        "/api/auth/signin", json={"email": private_server.username.lower(), "password": private_server.password}
    )
    assert response.status_code == 401


def test_every_authenticated_answer_carries_a_fresh_token_and_old_ones_keep_working(
    private_user: ServerUser,
) -> None:
    http = private_user.server.http
    first = signin_token(private_user.server, private_user.username, private_user.password)
    seen = {first}
    answer = http.get("/api/user/branches", headers=auth(private_user, first))
    assert answer.status_code == 200
    second = answer.headers["x-token"]
    assert TOKEN.match(second)
    assert second not in seen
    seen.add(second)
    # The first token still works after the server handed out the second one ...
    again = http.get("/api/user/branches", headers=auth(private_user, first))
    assert again.status_code == 200
    assert again.headers["x-token"] not in seen
    seen.add(again.headers["x-token"])
    # ... and so does the fresh one; an error envelope carries a fresh token too.
    error = http.get("/api/user/code", params={"branch": "nope"}, headers=auth(private_user, second))
    assert error.status_code == 200
    assert error.json() == {"error": "no code"}
    assert error.headers["x-token"] not in seen
    # Signing in again leaves the earlier tokens valid.
    later = signin_token(private_user.server, private_user.email, private_user.password)
    for token in (first, second, later):
        assert http.get("/api/user/branches", headers=auth(private_user, token)).status_code == 200
    # X-Username may be anything non-empty: the token alone names the user.
    anyone = http.get("/api/user/branches", headers={"X-Token": second, "X-Username": "whoever"})
    assert anyone.status_code == 200


def test_tokens_live_60_seconds_and_use_does_not_extend_them(
    private_server: PrivateServer, private_user: ServerUser
) -> None:
    token = signin_token(private_server, private_user.username, private_user.password)
    ttl = float(private_server.cli(f'storage.env.ttl("auth_{token}")'))
    assert 50 < ttl <= 60
    time.sleep(1.1)
    used = private_server.http.get("/api/user/branches", headers=auth(private_user, token))
    assert used.status_code == 200
    assert float(private_server.cli(f'storage.env.ttl("auth_{token}")')) < ttl
    fresh = used.headers["x-token"]
    assert 58 < float(private_server.cli(f'storage.env.ttl("auth_{fresh}")')) <= 60
    # Expiry is enforced by a sweep every 10 s, so a token works for 60 to 70 s. Age this one to 1 s and wait.
    private_server.cli(f'storage.env.expire("auth_{token}", 1)')
    expired_at = time.monotonic() + 1
    while True:
        answer = private_server.http.get("/api/user/branches", headers=auth(private_user, token))
        if answer.status_code != 200 or time.monotonic() > expired_at + 15:
            break
        time.sleep(0.25)
    assert answer.status_code == 401
    assert answer.json() == {"error": "unauthorized"}
    assert time.monotonic() - expired_at < 11.5


def test_401_shapes(private_server: PrivateServer, private_user: ServerUser) -> None:
    http = private_server.http
    token = private_user.signin()
    cases: dict[str, httpx.Response] = {
        "no credentials": http.get("/api/user/branches"),
        "token without X-Username": http.get("/api/user/branches", headers={"X-Token": token}),
        "unknown token": http.get("/api/user/branches", headers={"X-Token": "0" * 40, "X-Username": "x"}),
        "_token query": http.get("/api/user/branches", params={"_token": token}),
        "POST without credentials": http.post("/api/user/code", json={"branch": "default", "modules": {}}),
    }
    for name, response in cases.items():
        assert response.status_code == 401, name
        assert response.headers["content-type"] == "application/json; charset=utf-8", name
        assert response.json() == {"error": "unauthorized"}, name
        assert "x-token" not in response.headers, name
    # passport-token also reads the query parameters `token` and `username` (not `_token`).
    query = http.get("/api/user/branches", params={"token": token, "username": "x"})
    assert query.status_code == 200
    assert "x-token" in query.headers


def test_http_basic_only_on_post_code(private_server: PrivateServer, private_user: ServerUser) -> None:
    http = private_server.http
    basic = (private_user.username, private_user.password)
    get = http.get("/api/user/code", auth=basic)
    assert get.status_code == 401
    assert get.json() == {"error": "unauthorized"}
    assert http.get("/api/user/branches", auth=basic).status_code == 401
    for login in (private_user.username, private_user.email):
        post = http.post(
            "/api/user/code",
            json={"branch": "default", "modules": {"main": login}},
            auth=(login, private_user.password),
        )
        assert post.status_code == 200
        assert post.json()["ok"] == 1
        assert TOKEN.match(post.headers["x-token"])  # usable for the token-only routes that follow
        assert private_user.code("default") == {"main": login}
    wrong = http.post(
        "/api/user/code", json={"branch": "default", "modules": {"main": "x"}}, auth=(private_user.username, "bad")
    )
    assert wrong.status_code == 401
    assert wrong.text == "Unauthorized"
    assert private_user.code("default") == {"main": private_user.email}
    follow_up = http.post(
        "/api/user/set-active-branch",
        json={"branch": "default", "activeName": "activeSim"},
        auth=basic,
    )
    assert follow_up.status_code == 401


def test_no_rate_limit_headers_and_no_429(private_user: ServerUser) -> None:
    # The official server allows 60 GET /api/user/code per hour; the private server has no limits at all.
    for _ in range(70):
        response = private_user.request("GET", "/api/user/code", params={"branch": "default"})
        assert response.status_code == 200
        assert not [h for h in response.headers if h.lower().startswith("x-ratelimit")], response.headers


# --- branches and code ---


def test_branches_shape_of_a_new_user(private_user: ServerUser) -> None:
    response = private_user.request("GET", "/api/user/branches")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"ok", "list"}
    (branch,) = body["list"]
    assert branch["branch"] == "default"
    assert branch["activeWorld"] is True
    assert branch["activeSim"] is True
    assert branch["modules"] == {"main": ""}
    assert isinstance(branch["_id"], str)
    assert {"user", "meta", "$loki"} <= set(branch)
    assert "timestamp" not in branch  # until the first upload


def test_get_code_default_active_and_unknown(private_user: ServerUser) -> None:
    private_user.upload("default", {"main": "world"})
    private_user.clone_branch("", "sim", {"main": "sim"})
    private_user.set_active_branch("sim", "activeSim")
    expectations = {
        None: ("default", {"main": "world"}),
        "$activeWorld": ("default", {"main": "world"}),
        "$activeSim": ("sim", {"main": "sim"}),
        "sim": ("sim", {"main": "sim"}),
    }
    for branch, (name, modules) in expectations.items():
        params = {"branch": branch} if branch else None
        response = private_user.request("GET", "/api/user/code", params=params)
        assert response.status_code == 200
        assert response.json() == {"ok": 1, "branch": name, "modules": modules}, branch
    for unknown in ("nope", "$bogus", "Default"):
        response = private_user.request("GET", "/api/user/code", params={"branch": unknown})
        assert response.status_code == 200
        assert response.json() == {"error": "no code"}, unknown


def test_post_code_replaces_all_modules(private_user: ServerUser) -> None:
    first = private_user.request(
        "POST", "/api/user/code", json={"branch": "default", "modules": {"main": "1", "a": "a"}}
    )
    body = first.json()
    assert set(body) == {"ok", "timestamp"}
    assert body["ok"] == 1
    assert isinstance(body["timestamp"], int)
    assert abs(body["timestamp"] / 1000 - time.time()) < 300
    private_user.upload("default", {"main": "2", "b": "b"})
    assert private_user.code("default") == {"main": "2", "b": "b"}
    # Without a branch the upload goes to the branch active in the world.
    no_branch = private_user.request("POST", "/api/user/code", json={"modules": {"main": "3"}})
    assert no_branch.json()["ok"] == 1
    assert private_user.code("default") == {"main": "3"}
    # The stored timestamp is the upload time in milliseconds.
    (branch,) = private_user.branches()
    assert isinstance(branch["timestamp"], int)


def test_post_code_never_creates_a_branch(private_user: ServerUser) -> None:
    response = private_user.request("POST", "/api/user/code", json={"branch": "nope", "modules": {"main": "x"}})
    assert response.status_code == 200
    assert response.json() == {"error": "branch does not exist"}
    assert "x-token" in response.headers
    assert private_user.branch_names() == ["default"]
    # A route's exception comes back in the same envelope: no modules, or a body that is not parsed as JSON.
    type_error = {"error": "TypeError: Cannot read properties of undefined (reading 'length')"}
    no_modules = private_user.request("POST", "/api/user/code", json={"branch": "default"})
    assert no_modules.status_code == 200
    assert no_modules.json() == type_error
    token = private_user.signin()
    as_text = private_user.server.http.post(
        "/api/user/code",
        content=utf8_json({"branch": "default", "modules": {"main": "x"}}),
        headers={**auth(private_user, token), "Content-Type": "text/plain"},
    )
    assert as_text.status_code == 200
    assert as_text.json() == type_error
    assert private_user.code("default") == {"main": ""}


def test_module_names_the_server_drops_keeps_and_renames(private_user: ServerUser) -> None:
    private_user.upload(
        "default",
        {
            "role.harvester": "a",
            "lib/util": "b",
            "win\\path": "c",
            "$dollar": "d",
            ".hidden": "e",
            "/rooted": "f",
            "\\backslash": "g",
            "a$DOT$b": "h",
        },
    )
    # Leading $ . / \ are dropped silently, main is added, and the server's own escape ($DOT$) reads back as ".".
    assert private_user.code("default") == {
        "role.harvester": "a",
        "lib/util": "b",
        "win\\path": "c",
        "a.b": "h",
        "main": "",
    }


def test_binary_modules_are_stored_and_returned_verbatim(private_user: ServerUser) -> None:
    wasm = b"\0asm\x01\0\0\0"
    padded = base64.b64encode(wasm).decode()
    modules = {
        "main": "module.exports.loop = function () {}",
        "padded": {"binary": padded},
        "unpadded": {"binary": padded.rstrip("=")},
        "app.wasm": {"binary": padded},
    }
    private_user.upload("default", modules)
    assert private_user.code("default") == modules
    (branch,) = private_user.branches()
    assert branch["modules"] == modules  # GET /api/user/branches carries the same module map


def test_the_5mb_rule_counts_utf16_units_of_compact_json(private_user: ServerUser) -> None:
    overhead = len('{"main":""}')
    cases = {
        "ascii at the limit": ("x" * (FIVE_MB - overhead), True),
        "ascii one over": ("x" * (FIVE_MB - overhead + 1), False),
        # An emoji is 2 UTF-16 units: a code-point count would let this one through.
        "emoji one over": ("x" * (FIVE_MB - overhead - 2000 + 1) + "\U0001f600" * 1000, False),
        "emoji at the limit": ("x" * (FIVE_MB - overhead - 2000) + "\U0001f600" * 1000, True),
        # JSON escapes count: a newline is 2 characters of JSON.
        "newlines one over": ("x" * (FIVE_MB - overhead - 2000 + 1) + "\n" * 1000, False),
    }
    for name, (text, accepted) in cases.items():
        modules = {"main": text}
        assert code_length(modules) == (FIVE_MB if accepted else FIVE_MB + 1), name  # our model of the rule
        response = post_code(private_user, utf8_json({"branch": "default", "modules": modules}))
        assert response.status_code == 200, name
        if accepted:
            assert response.json()["ok"] == 1, name
        else:
            assert response.json() == {"error": "code length exceeds 5 MB limit"}, name


def test_request_bodies_over_8_mib_are_refused_with_html(private_user: ServerUser) -> None:
    body = utf8_json({"branch": "default", "modules": {"main": "fits"}})
    exactly = body + b" " * (BODY_LIMIT - len(body))
    assert post_code(private_user, exactly).json()["ok"] == 1
    over = post_code(private_user, exactly + b" ")
    assert over.status_code == 413
    assert over.headers["content-type"] == "text/html; charset=utf-8"
    assert "PayloadTooLargeError: request entity too large" in over.text
    assert "x-token" not in over.headers  # the body is refused before authentication
    broken = post_code(private_user, b"{not json")
    assert broken.status_code == 400
    assert broken.headers["content-type"] == "text/html; charset=utf-8"
    assert "x-token" not in broken.headers
    assert private_user.code("default") == {"main": "fits"}


def test_clone_branch(private_user: ServerUser) -> None:
    private_user.upload("default", {"main": "source", "role.a": "a"})

    def clone(body: dict[str, Any]) -> dict[str, Any]:
        response = private_user.request("POST", "/api/user/clone-branch", json=body)
        assert response.status_code == 200
        answer = response.json()
        assert isinstance(answer, dict)
        return answer

    answer = clone({"branch": "default", "newName": "copy", "defaultModules": {"main": "ignored"}})
    assert set(answer) == {"ok", "timestamp"}
    assert answer["ok"] == 1
    assert private_user.code("copy") == {"main": "source", "role.a": "a"}  # a source wins over defaultModules
    clone({"branch": "", "newName": "fresh", "defaultModules": {"main": "new", "lib.x": "x"}})
    assert private_user.code("fresh") == {"main": "new", "lib.x": "x"}
    clone({"branch": "missing", "newName": "fallback", "defaultModules": {"lib": "l"}})
    assert private_user.code("fallback") == {"lib": "l", "main": ""}
    clone({"newName": "bare"})
    assert private_user.code("bare") == {"main": ""}
    # Cloning onto an existing name overwrites that branch's modules.
    clone({"branch": "fresh", "newName": "copy"})
    assert private_user.code("copy") == {"main": "new", "lib.x": "x"}
    # The source name may have at most 30 characters; the new name is not checked.
    assert clone({"branch": "s" * 31, "newName": "long-source"}) == {"error": "invalid branch name"}
    clone({"branch": "default", "newName": "n" * 40})
    assert "n" * 40 in private_user.branch_names()
    # A cloned branch has no active flags at all (not false), and an ISO date string as timestamp.
    cloned = {b["branch"]: b for b in private_user.branches()}["fresh"]
    assert "activeWorld" not in cloned
    assert "activeSim" not in cloned
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", cloned["timestamp"])


def test_a_user_has_at_most_30_branches(private_user: ServerUser) -> None:
    for n in range(1, 30):
        private_user.clone_branch("default", f"b{n:02}")
    assert len(private_user.branches()) == 30
    response = private_user.request("POST", "/api/user/clone-branch", json={"branch": "default", "newName": "b30"})
    assert response.status_code == 200
    assert response.json() == {"error": "too many branches"}
    # At the limit, cloning onto an existing name still works, and so do names like tutorial-1.
    private_user.clone_branch("", "b01", {"main": "overwritten"})
    assert private_user.code("b01") == {"main": "overwritten"}
    private_user.clone_branch("default", "tutorial-1")
    assert len(private_user.branches()) == 31


def test_set_active_branch(private_user: ServerUser) -> None:
    private_user.clone_branch("default", "next")
    response = private_user.request(
        "POST", "/api/user/set-active-branch", json={"branch": "next", "activeName": "activeWorld"}
    )
    assert response.status_code == 200
    assert response.json() == {"ok": 1}
    flags = {b["branch"]: (b.get("activeWorld"), b.get("activeSim")) for b in private_user.branches()}
    assert flags == {"default": (False, True), "next": (True, None)}
    assert private_user.active_branch("activeWorld") == "next"
    assert private_user.active_branch("activeSim") == "default"
    bad = {
        "bogus activeName": ({"branch": "next", "activeName": "world"}, "invalid params"),
        "no activeName": ({"branch": "next"}, "invalid params"),
        "unknown branch": ({"branch": "nope", "activeName": "activeSim"}, "no branch"),
    }
    for name, (body, error) in bad.items():
        answer = private_user.request("POST", "/api/user/set-active-branch", json=body)
        assert answer.status_code == 200, name
        assert answer.json() == {"error": error}, name
    assert private_user.active_branch("activeSim") == "default"


def test_delete_branch(private_user: ServerUser) -> None:
    for name in ("a", "b", "c"):
        private_user.clone_branch("default", name)
    private_user.set_active_branch("a", "activeSim")
    for body in ({"branch": "b"}, {"branch": "a"}, {"branch": "default"}, {"branch": "nope"}):
        response = private_user.request("POST", "/api/user/delete-branch", json=body)
        assert response.status_code == 200
        answer = response.json()
        assert set(answer) == {"ok", "timestamp"}, body
    # b is gone; active branches (a for the simulator, default for the world) are kept without a word.
    assert private_user.branch_names() == ["a", "c", "default"]
    # Without a "branch" the query matches every branch: all inactive ones are deleted.
    private_user.request("POST", "/api/user/delete-branch", json={})
    assert private_user.branch_names() == ["a", "default"]


def test_branches_recreates_a_deleted_default(private_user: ServerUser) -> None:
    private_user.clone_branch("default", "main-line")
    private_user.set_active_branch("main-line", "activeWorld")
    private_user.set_active_branch("main-line", "activeSim")
    private_user.request("POST", "/api/user/delete-branch", json={"branch": "default"})
    assert private_user.code("main-line") == {"main": ""}
    assert private_user.request("GET", "/api/user/code", params={"branch": "default"}).json() == {"error": "no code"}
    # GET /api/user/branches inserts a new "default" (main: "") whenever none exists.
    assert private_user.branch_names() == ["default", "main-line"]
    assert private_user.code("default") == {"main": ""}


def test_unknown_routes_are_html_404(private_server: PrivateServer, private_user: ServerUser) -> None:
    token = private_user.signin()
    for path in ("/api/auth/query-token", "/api/user/me"):
        response = private_server.http.get(path, params={"token": token}, headers=auth(private_user, token))
        assert response.status_code == 404, path
        assert response.headers["content-type"] == "text/html; charset=utf-8"
        assert f"Cannot GET {path}" in response.text
    me = private_server.http.get("/api/auth/me", headers=auth(private_user, token))
    assert me.status_code == 200
    assert me.json()["username"] == private_user.username


# --- the stand-in answers as the private server does: the same request to both, compared ---
#
# Each test sends the same requests to the private server (a fresh user) and to the stand-in (alice, a fresh
# database) and compares what clients read: ours (``gitops.edges.service``) and the ones the stand-in's fidelity
# facts came from (node-screeps-api and its CLI, python screepsapi). The stand-in's own tests of the same facts are
# in ``tests/standin/test_fidelity.py``; the differences that remain are listed in ``docs/serve.md``.


class Peers:
    """One user on each server; :meth:`both` sends a request to the two and returns (private, stand-in)."""

    def __init__(self, private: ServerUser, standin: StandIn) -> None:
        self.private = private
        self.standin = standin
        standin.grant_unlimited(FULL_TOKEN)  # the 8 MiB uploads must not meet the stand-in's rate limits
        self.http = httpx.Client(base_url=standin.url, headers={"X-Token": FULL_TOKEN}, timeout=60)

    def both(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json: Any = None,
        content: bytes | None = None,
    ) -> tuple[httpx.Response, httpx.Response]:
        headers = {"Content-Type": "application/json"} if content is not None else {}
        if content is not None:
            token = self.private.signin()
            private = self.private.server.http.request(
                method, path, params=params, content=content, headers={**auth(self.private, token), **headers}
            )
        else:
            private = self.private.request(method, path, params=params, json=json)
        standin = self.http.request(method, path, params=params, json=json, content=content, headers=headers)
        return private, standin

    def both_json(self, method: str, path: str, **kwargs: Any) -> tuple[Any, Any]:
        private, standin = self.both(method, path, **kwargs)
        for server, response in (("private server", private), ("stand-in", standin)):
            assert response.status_code == 200, f"{server}: {response.status_code} {response.text[:200]}"
            assert response.headers["content-type"] == "application/json; charset=utf-8", server
        return private.json(), standin.json()


@pytest.fixture
def peers(private_user: ServerUser, standin: StandIn) -> Iterator[Peers]:
    pair = Peers(private_user, standin)
    with pair.http:
        yield pair


def test_peer_a_never_written_segment_answers_without_data(peers: Peers) -> None:
    private, standin = peers.both_json("GET", "/api/user/memory-segment", params={"segment": "3"})
    # python screepsapi reads answer.get('data'); {"ok":1,"data":null} crashed it on the stand-in only.
    assert private == standin == {"ok": 1}
    peers.both_json("POST", "/api/user/memory-segment", json={"segment": 3, "data": "written"})
    private, standin = peers.both_json("GET", "/api/user/memory-segment", params={"segment": "3"})
    assert private == standin == {"ok": 1, "data": "written"}


@pytest.mark.parametrize(("segment", "read"), [("5,6", "five"), ("6", "six"), ("6abc", "six")])
def test_peer_a_segment_list_reads_its_first_segment(peers: Peers, segment: str, read: str) -> None:
    for number, data in ((5, "five"), (6, "six")):
        private, standin = peers.both_json("POST", "/api/user/memory-segment", json={"segment": number, "data": data})
        assert private == standin == {"ok": 1}
    private, standin = peers.both_json("GET", "/api/user/memory-segment", params={"segment": segment})
    assert private == standin == {"ok": 1, "data": read}


@pytest.mark.parametrize("segment", ["100", "-1", "abc", ""])
def test_peer_a_segment_out_of_range_is_the_same_error(peers: Peers, segment: str) -> None:
    private, standin = peers.both_json("GET", "/api/user/memory-segment", params={"segment": segment})
    assert private == standin == {"error": "invalid segment ID"}


def test_peer_money_history_is_at_api_user_money_history(peers: Peers) -> None:
    for params in (None, {"page": "2"}):
        private, standin = peers.both_json("GET", "/api/user/money-history", params=params)
        page = int(params["page"]) if params else 0
        assert private == standin == {"ok": 1, "page": page, "list": [], "hasMore": False}
    # The interface document's path: the stand-in serves it too (a known difference, docs/serve.md).
    private_doc, standin_doc = peers.both("GET", "/api/game/user/money-history")
    assert private_doc.status_code == 404
    assert standin_doc.json() == {"ok": 1, "page": 0, "list": [], "hasMore": False}


def test_peer_branch_list_entries_carry_modules_and_a_timestamp(peers: Peers) -> None:
    modules = {"main": "m", "role.x": "r", "lib/util": "u"}
    private_up, standin_up = peers.both_json("POST", "/api/user/code", json={"branch": "default", "modules": modules})
    assert set(private_up) == set(standin_up) == {"ok", "timestamp"}
    private, standin = peers.both_json("GET", "/api/user/branches")
    assert set(private) == set(standin) == {"ok", "list"}
    (private_entry,) = private["list"]
    (standin_entry,) = standin["list"]
    # What clients read of an entry: the same keys with the same values (the private server adds its database's
    # meta and $loki, which no client reads).
    shared = {"_id", "user", "branch", "modules", "activeWorld", "activeSim", "timestamp"}
    assert shared <= set(private_entry)
    assert set(standin_entry) == shared
    for entry in (private_entry, standin_entry):
        assert (entry["branch"], entry["modules"], entry["activeWorld"], entry["activeSim"]) == (
            "default",
            modules,
            True,
            True,
        )
        assert isinstance(entry["_id"], str)
        assert isinstance(entry["user"], str)
        # Epoch milliseconds of the upload, within a millisecond of what the upload answered.
        assert isinstance(entry["timestamp"], int)
    # Two Date.now() calls of the one request: a millisecond apart when quiet, a few on a loaded machine.
    assert 0 <= private_up["timestamp"] - private_entry["timestamp"] <= 1000
    assert abs(private_entry["timestamp"] / 1000 - time.time()) < 300


def test_peer_clone_branch_with_default_modules_creates_the_branch_with_them(peers: Peers) -> None:
    body = {"newName": "feature", "defaultModules": {"main": "loop()", "lib/a.b": "x", "$dropped": "y"}}
    private, standin = peers.both_json("POST", "/api/user/clone-branch", json=body)
    assert set(private) == set(standin) == {"ok", "timestamp"}
    private, standin = peers.both_json("GET", "/api/user/code", params={"branch": "feature"})
    # Names starting with '$' are dropped as an upload drops them.
    assert private == standin == {"ok": 1, "branch": "feature", "modules": {"main": "loop()", "lib/a.b": "x"}}
    # Without main, main is added; with a source that exists, its modules win over defaultModules.
    peers.both_json("POST", "/api/user/clone-branch", json={"newName": "lib-only", "defaultModules": {"lib": "l"}})
    private, standin = peers.both_json("GET", "/api/user/code", params={"branch": "lib-only"})
    assert private["modules"] == standin["modules"] == {"lib": "l", "main": ""}
    body = {"branch": "feature", "newName": "copy", "defaultModules": {"main": "ignored"}}
    peers.both_json("POST", "/api/user/clone-branch", json=body)
    private, standin = peers.both_json("GET", "/api/user/code", params={"branch": "copy"})
    assert private["modules"] == standin["modules"] == {"main": "loop()", "lib/a.b": "x"}
    private, standin = peers.both_json("GET", "/api/user/branches")
    assert sorted(b["branch"] for b in private["list"]) == sorted(b["branch"] for b in standin["list"])


def test_peer_the_body_limit_is_8_mib_and_over_it_is_413(peers: Peers) -> None:
    body = utf8_json({"branch": "default", "modules": {"main": "fits"}})
    exactly = body + b" " * (BODY_LIMIT - len(body))
    private, standin = peers.both("POST", "/api/user/code", content=exactly)
    assert private.json()["ok"] == standin.json()["ok"] == 1
    private, standin = peers.both("POST", "/api/user/code", content=exactly + b" ")
    for response in (private, standin):
        assert response.status_code == 413
        assert response.headers["content-type"] == "text/html; charset=utf-8"
        assert "PayloadTooLargeError: request entity too large" in response.text
        assert "x-token" not in response.headers  # refused before authentication
    # The case: under 5 MB of code, 9 MB on the wire as \u00e9 escapes.
    escaped = json.dumps({"branch": "default", "modules": {"main": "\u00e9" * 1_500_000}}).encode("ascii")
    assert BODY_LIMIT < len(escaped) < 2 * BODY_LIMIT
    private, standin = peers.both("POST", "/api/user/code", content=escaped)
    assert private.status_code == standin.status_code == 413
    private_code, standin_code = peers.both_json("GET", "/api/user/code", params={"branch": "default"})
    assert private_code["modules"] == standin_code["modules"] == {"main": "fits"}


def test_peer_the_empty_module_name_is_kept_and_base64_is_stored_as_sent(peers: Peers) -> None:
    modules = {
        "": "empty",
        "main": "m",
        "w1": {"binary": "AGFz\nbQ=="},
        "w2": {"binary": "-_8"},
        "w3": {"binary": "AG Fz"},
    }
    private, standin = peers.both_json("POST", "/api/user/code", json={"branch": "default", "modules": modules})
    assert private["ok"] == standin["ok"] == 1
    private, standin = peers.both_json("GET", "/api/user/code", params={"branch": "default"})
    assert private["modules"] == standin["modules"] == modules


def test_peer_a_lone_surrogate_counts_six_units_of_the_five_megabytes(peers: Peers) -> None:
    overhead = code_length({"main": ""})
    assert code_length({"main": "\udc00"}) == overhead + 6
    for extra, fits in ((6, True), (5, False)):
        modules = {"main": "x" * (FIVE_MB - overhead - extra) + "\udc00"}
        body = json.dumps({"branch": "default", "modules": modules}).encode("ascii")
        private, standin = peers.both("POST", "/api/user/code", content=body)
        for response in (private, standin):
            answer = response.json()
            assert (answer.get("ok") == 1) is fits, answer
            assert fits or answer == {"error": "code length exceeds 5 MB limit"}


def test_peer_body_parser_charsets_and_a_byte_order_mark(peers: Peers) -> None:
    body = utf8_json({"branch": "default", "modules": {"main": "bom"}})
    token = peers.private.signin()
    for content, content_type, accepted in (
        (b"\xef\xbb\xbf" + body, "application/json", True),
        (body, "application/json; charset=iso-8859-1", False),
        (body, "application/vnd.api+json", False),
    ):
        private = peers.private.server.http.post(
            "/api/user/code", content=content, headers={**auth(peers.private, token), "Content-Type": content_type}
        )
        standin = peers.http.post("/api/user/code", content=content, headers={"Content-Type": content_type})
        for response in (private, standin):
            ok = response.status_code == 200 and response.json().get("ok") == 1
            assert ok is accepted, (content_type, response.status_code, response.text[:200])
        token = peers.private.signin()


def test_peer_the_tutorial_exemption_takes_ascii_digits_only(peers: Peers) -> None:
    for i in range(29):
        peers.both_json("POST", "/api/user/clone-branch", json={"newName": f"b{i}"})
    private, standin = peers.both_json("POST", "/api/user/clone-branch", json={"newName": "tutorial-\u0663"})
    assert private == standin == {"error": "too many branches"}
    private, standin = peers.both_json("POST", "/api/user/clone-branch", json={"newName": "tutorial-3"})
    assert private["ok"] == standin["ok"] == 1


@pytest.mark.parametrize("encoding", ["deflate", "gzip", "deflate-parts"])
def test_peer_compressed_bodies_are_inflated_and_the_limit_is_on_the_inflated_size(
    peers: Peers, encoding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deflate-parts is what the tool sends for a large upload (gitops.edges.bodies: parts deflated at once, joined
    under one zlib header): the private server's Node inflater reads it as one stream, as the stand-in does."""
    import gzip
    import zlib

    from gitops.edges import bodies

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    packs: dict[str, Callable[[bytes], bytes]] = {
        "deflate": zlib.compress,
        "gzip": gzip.compress,
        "deflate-parts": bodies._deflate,
    }
    pack = packs[encoding]
    modules = {"main": "module.exports.loop = () => {};\n" * 3000}
    if encoding == "deflate-parts":  # large enough to be cut in two
        modules |= {f"part{n}": f"module.exports.n = {n}; // {'creep ' * (n % 7 + 1)}\n" * 800 for n in range(60)}
    raw = utf8_json({"branch": "default", "modules": modules})
    assert encoding != "deflate-parts" or len(raw) >= 2 * bodies.PART_BYTES
    body = pack(raw)
    token = peers.private.signin()
    headers = {"Content-Type": "application/json", "Content-Encoding": encoding.removesuffix("-parts")}
    private = peers.private.server.http.post(
        "/api/user/code", content=body, headers={**auth(peers.private, token), **headers}
    )
    standin = peers.http.post("/api/user/code", content=body, headers=headers)
    assert private.json()["ok"] == standin.json()["ok"] == 1
    private_code, standin_code = peers.both_json("GET", "/api/user/code", params={"branch": "default"})
    assert private_code["modules"] == standin_code["modules"] == modules
    # Small on the wire, over 8 MiB inflated: the same 413 from both.
    bomb = pack(b'{"branch":"default","modules":{"main":"' + b" " * (BODY_LIMIT + 10) + b'"}}')
    assert len(bomb) < 100_000
    token = peers.private.signin()
    private = peers.private.server.http.post(
        "/api/user/code", content=bomb, headers={**auth(peers.private, token), **headers}
    )
    standin = peers.http.post("/api/user/code", content=bomb, headers=headers)
    assert private.status_code == standin.status_code == 413
