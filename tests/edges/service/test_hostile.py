"""The client against hostile or broken servers (issue 11, "Resource bounds" and deep JSON): every answer is read
with the cap of its endpoint and every request ends by its deadline, with a clear exit-1 message.

The servers are real sockets on 127.0.0.1 (``tests/hostile.py``); the client is the real ``ServiceClient``, and
``gitops plan`` runs as a subprocess where memory is measured.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from gitops.cli import run
from gitops.config.credentials import TokenAuth
from gitops.core.codeset import code_length
from gitops.core.endpoints import BRANCHES_ANSWER_CAP, CODE_ANSWER_CAP, MAX_CODE_LENGTH, SMALL_ANSWER_CAP, answer_cap
from gitops.edges.clock import ManualClock
from gitops.edges.http import MAX_JSON_DEPTH, UnreadableJSON, parse_json
from gitops.edges.service.client import ServiceClient
from gitops.errors import NetworkError, ServiceError
from gitops.secrets import Secret
from tests.factories import make_repo, write_manifest
from tests.hostile import (
    SLOW_BODY,
    SLOW_HEADERS,
    Behaviour,
    HostileServer,
    answer,
    endless_chunked,
    gzip_bomb,
    hostile_server,
    huge,
    kept_alive_then,
    silence,
    words,
)

TOKEN = "tok-hostile-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[3]

MakeClient = Callable[..., ServiceClient]


@pytest.fixture
def client_for() -> Iterator[MakeClient]:
    made: list[ServiceClient] = []

    def make(server: HostileServer, *, timeout: float = 30.0) -> ServiceClient:
        client = ServiceClient(
            server_name="evil",
            url=server.url,
            auth=TokenAuth(Secret(TOKEN), "the environment variable SCREEPS_TOKEN"),
            clock=ManualClock(1_800_000_000.0),  # backoff between retries takes no time
            timeout=timeout,
        )
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


# --- the caps -----------------------------------------------------------------------------------------------


def test_the_code_cap_holds_the_largest_code_answer_a_server_can_send() -> None:
    # The worst case: every UTF-16 unit the 5 MB limit counts written as a 6-byte \uXXXX escape.
    assert CODE_ANSWER_CAP >= 6 * MAX_CODE_LENGTH + 1024 * 1024
    assert CODE_ANSWER_CAP <= 40 * 1024 * 1024
    assert answer_cap("GET /api/user/code") == CODE_ANSWER_CAP
    assert answer_cap("GET /api/user/branches") == BRANCHES_ANSWER_CAP
    assert answer_cap("POST /api/user/code") == SMALL_ANSWER_CAP == answer_cap("GET /api/auth/query-token")


def test_a_full_branch_of_escaped_code_is_read(client_for: MakeClient) -> None:
    # 5 MB of code as a server that escapes non-ASCII sends it: 6 bytes per counted unit, 30 MiB on the wire.
    count = MAX_CODE_LENGTH - len('{"main":""}')
    assert code_length({"main": "\u00e9" * count}) == MAX_CODE_LENGTH
    body = b'{"ok":1,"branch":"main","modules":{"main":"' + b"\\u00e9" * count + b'"}}'
    assert len(body) > 6 * MAX_CODE_LENGTH - 100
    with hostile_server(answer(body)) as server:
        code = client_for(server).get_code("main")
    assert code is not None
    assert code.modules["main"].text == "\u00e9" * count


def test_a_100_mb_code_answer_is_refused_at_the_cap(client_for: MakeClient) -> None:
    with hostile_server(huge(100 * 1024 * 1024)) as server, pytest.raises(ServiceError) as info:
        client_for(server).get_code("main")
    assert info.value.exit_code == 1
    assert info.value.message == (
        "server 'evil' sent more than 32 MiB in answer to GET /api/user/code, the most the tool reads of that "
        "answer; it stopped reading."
    )
    assert server.connections == 1  # not retried: a hostile server would send the same again


def test_an_endless_chunked_answer_is_refused_at_the_cap(client_for: MakeClient) -> None:
    with hostile_server(endless_chunked) as server, pytest.raises(ServiceError) as info:
        client_for(server).list_branches()
    assert info.value.message.startswith("server 'evil' sent more than 64 MiB in answer to GET /api/user/branches")
    assert "delete the branches no longer needed" in str(info.value)


def test_a_small_endpoint_has_a_small_cap(client_for: MakeClient) -> None:
    with hostile_server(huge(2 * 1024 * 1024)) as server, pytest.raises(ServiceError) as info:
        client_for(server).set_active_branch("main", "world")
    assert info.value.message.startswith(
        "server 'evil' sent more than 1 MiB in answer to POST /api/user/set-active-branch"
    )


def test_a_gzip_bomb_is_stopped_at_the_cap_of_decoded_bytes(client_for: MakeClient) -> None:
    with hostile_server(gzip_bomb) as server, pytest.raises(ServiceError) as info:
        client_for(server).get_code("main")
    assert info.value.message.startswith("server 'evil' sent more than 32 MiB in answer to GET /api/user/code")


def test_a_gzipped_answer_is_read(client_for: MakeClient) -> None:
    body = gzip.compress(b'{"ok":1,"branch":"main","modules":{"main":"zipped"}}')
    with hostile_server(answer(body, headers=b"Content-Encoding: gzip\r\n")) as server:
        code = client_for(server).get_code("main")
    assert code is not None
    assert code.modules["main"].text == "zipped"


def test_corrupt_gzip_is_a_clear_error(client_for: MakeClient) -> None:
    with (
        hostile_server(answer(b"not gzip at all", headers=b"Content-Encoding: gzip\r\n")) as server,
        pytest.raises(ServiceError) as info,
    ):
        client_for(server).get_code("main")
    assert info.value.message == (
        "server 'evil' answered GET /api/user/code with JSON the tool cannot read: the answer's gzip data is corrupt."
    )


# --- the deadline -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("behaviour", [SLOW_HEADERS, SLOW_BODY, silence], ids=["slow-headers", "slow-body", "silent"])
def test_a_slow_or_silent_server_ends_by_the_deadline_retries_included(
    client_for: MakeClient, behaviour: Behaviour
) -> None:
    with hostile_server(behaviour) as server:
        client = client_for(server, timeout=1.0)
        started = time.monotonic()
        with pytest.raises(NetworkError) as info:
            client.get_code("main")
        took = time.monotonic() - started
    assert info.value.exit_code == 1
    assert info.value.message == f"server 'evil' did not answer GET /api/user/code within 1 s ({server.url})."
    # About the deadline, not once per attempt (4 attempts would take 4 s; one connection shows there was no
    # retry), and never for ever. The margin is for a loaded machine waking the watchdog late, not for the client.
    assert 0.9 <= took < 3.5
    assert server.connections == 1


@pytest.mark.parametrize("then", [SLOW_HEADERS, SLOW_BODY], ids=["slow-headers", "slow-body"])
def test_a_request_over_a_kept_alive_connection_ends_by_the_deadline_too(
    client_for: MakeClient, then: Behaviour
) -> None:
    # A byte at a time: no single read waits long, so only the watchdog (which must know the reused connection's
    # socket, made by the first request) ends the second request at its deadline.
    with hostile_server(kept_alive_then(b'{"ok":1,"list":[]}', then)) as server:
        client = client_for(server, timeout=1.0)
        assert client.list_branches() == []
        started = time.monotonic()
        with pytest.raises(NetworkError) as info:
            client.get_code("main")
        took = time.monotonic() - started
    assert info.value.message == f"server 'evil' did not answer GET /api/user/code within 1 s ({server.url})."
    assert 0.9 <= took < 2.0
    # The second request went over the first one's connection: the watchdog knew its socket without a new connect.
    assert server.connections == 1


def test_the_default_deadline_is_30_seconds() -> None:
    with ServiceClient(server_name="s", url="http://127.0.0.1:9", auth=None) as client:
        assert client._x._timeout == 30.0


# --- pathological JSON --------------------------------------------------------------------------------------


def test_deeply_nested_json_is_a_clear_error_not_a_recursion_error(client_for: MakeClient) -> None:
    with hostile_server(answer(b"[" * 100_000)) as server, pytest.raises(ServiceError) as info:
        client_for(server).get_code("main")
    assert info.value.exit_code == 1
    assert info.value.message == (
        "server 'evil' answered GET /api/user/code with application/json text starting '"
        + "[" * 80
        + f"' instead of JSON the tool can read (it is nested more than {MAX_JSON_DEPTH} levels deep)."
    )


def test_deep_json_that_python_could_parse_is_refused_too() -> None:
    deep = b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(UnreadableJSON, match="nested more than 64 levels deep"):
        parse_json(deep)
    ok = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert parse_json(ok) is not None
    assert parse_json(b'{"a": {"b": [1, 2, {"c": null}]}}') == {"a": {"b": [1, 2, {"c": None}]}}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"ok":1,"x":' + b"9" * 5000 + b"}", "Exceeds the limit (4300 digits) for integer string conversion"),
        (b'{"ok":1,"x":"\xff"}', "it is not UTF-8 text"),
        (b'{"ok":1,', "Expecting property name enclosed in double quotes"),
    ],
)
def test_other_unreadable_json(body: bytes, why: str) -> None:
    with pytest.raises(UnreadableJSON) as info:
        parse_json(body)
    assert str(info.value).startswith(why)


def test_deep_json_through_the_cli_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with hostile_server(answer(b"[" * 100_000)) as server:
        manifest = _project(tmp_path, server.url)
        monkeypatch.setenv("SCREEPS_TOKEN", TOKEN)
        code = run(
            ["plan", "-m", str(manifest), "--state-dir", str(tmp_path / "state")], clock=ManualClock(1_800_000_000.0)
        )
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Error: server 'local' answered GET /api/user/branches with application/json text starting '[[[" in err
    assert "nested more than 64 levels deep" in err
    assert "Traceback" not in err


# --- memory, measured on the real command -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        (endless_chunked, "sent more than 64 MiB in answer to GET /api/user/branches"),
        (gzip_bomb, "sent more than 64 MiB in answer to GET /api/user/branches"),
        (words(60 * 1024 * 1024), "answered GET /api/user/branches with text/plain text starting 'a a a"),
    ],
    ids=["endless", "gzip-bomb", "60-MiB-of-words"],
)
def test_plan_against_a_hostile_answer_stays_under_200_mb(tmp_path: Path, behaviour: Behaviour, message: str) -> None:
    with hostile_server(behaviour) as server:
        manifest = _project(tmp_path, server.url)
        # A parent of its own, so that the peak of its children is the peak of this one command.
        measure = (
            "import resource, subprocess, sys\n"
            "done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=60)\n"
            "sys.stderr.write(done.stderr)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(done.returncode)\n"
        )
        env = {**os.environ, "SCREEPS_TOKEN": TOKEN, "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "gitops", "plan", "-m", str(manifest), "--state-dir", str(tmp_path / "s")]
        done = subprocess.run(
            [sys.executable, "-c", measure, *command], check=False, capture_output=True, text=True, timeout=90, env=env
        )
    peak_mb = int(done.stdout.strip()) / 1024  # kilobytes on Linux
    assert done.returncode == 1, done.stderr
    assert f"Error: server 'local' {message}" in done.stderr
    assert peak_mb < 200, f"peak RSS {peak_mb:.0f} MB"


def _project(tmp_path: Path, url: str) -> Path:
    repo = make_repo(tmp_path / "bot", {"src/main.js": "module.exports.loop = () => {};\n"})
    return write_manifest(repo, servers={"local": {"url": url, "token_env": "SCREEPS_TOKEN"}})


def test_hostile_helpers_answer_well_formed_http() -> None:
    # The fake server itself: a plain answer reads back as sent.
    with hostile_server(answer(b'{"ok":1}')) as server, httpx.Client() as http:
        assert http.get(server.url + "/x").json() == {"ok": 1}
