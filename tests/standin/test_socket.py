"""The stand-in's game socket: greetings, auth by token and scope, subscriptions, ticks and injected console output,
over a real websocket on a loopback port."""

from __future__ import annotations

import base64
import json
import socket
import time
import zlib
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from gitops.standin.bounds import ServiceBounds
from gitops.standin.testing import ALICE, BOB, DEMO_ACCOUNTS, FULL_TOKEN, RESTRICTED_TOKEN, StandIn, running_standin

TIMEOUT = 3.0


def _recv(ws: ClientConnection) -> str:
    message = ws.recv(timeout=TIMEOUT)
    assert isinstance(message, str)
    return message


def _channel_messages(ws: ClientConnection, count: int) -> list[list[object]]:
    """The next ``count`` channel messages (greetings and auth answers skipped), bounded in count."""
    found: list[list[object]] = []
    for _ in range(count + 10):
        text = _recv(ws)
        if text.startswith("gz:"):
            text = zlib.decompress(base64.b64decode(text[3:])).decode()
        if text.startswith("["):
            found.append(json.loads(text))
            if len(found) == count:
                return found
    raise AssertionError(f"only {len(found)} channel messages")


def _user_id(standin: StandIn, name: str) -> str:
    account = standin.app.accounts.user(name)
    assert account is not None
    return account.user_id


def test_greets_authenticates_and_streams_ticks(standin: StandIn) -> None:
    standin.set_tick_seconds(0.02)
    uid = _user_id(standin, ALICE)
    with connect(standin.socket_url, open_timeout=TIMEOUT) as ws:
        assert _recv(ws).startswith("time ")
        assert _recv(ws) == "protocol 14"
        ws.send("auth " + FULL_TOKEN)
        answer = _recv(ws)
        assert answer.startswith("auth ok ")
        assert FULL_TOKEN not in answer
        ws.send(f"subscribe user:{uid}/console")
        ws.send(f"subscribe user:{uid}/cpu")
        messages = _channel_messages(ws, 6)
    channels = {m[0] for m in messages}
    assert channels == {f"user:{uid}/console", f"user:{uid}/cpu"}
    console = [m[1] for m in messages if m[0] == f"user:{uid}/console"]
    assert {"messages": {"log": [], "results": []}} in console
    assert not any("error" in c for c in console if isinstance(c, dict))


def test_a_rule_on_the_active_code_logs_and_fails_each_tick(standin: StandIn) -> None:
    standin.set_tick_seconds(0.02)
    standin.console_rule(ALICE, branch="default", log=["boot"], error="TypeError: x is undefined")
    standin.console_rule(ALICE, branch="other", error="never")
    uid = _user_id(standin, ALICE)
    with connect(standin.socket_url, open_timeout=TIMEOUT) as ws:
        ws.send("auth " + FULL_TOKEN)
        ws.send(f"subscribe user:{uid}/console")
        ws.send("gzip on")
        messages = [m[1] for m in _channel_messages(ws, 4)]
    assert {"messages": {"log": ["boot"], "results": []}} in messages
    assert {"error": "TypeError: x is undefined"} in messages
    assert {"error": "never"} not in messages


def test_restricted_token_without_websocket_scope_fails_auth(standin: StandIn) -> None:
    with connect(standin.socket_url, open_timeout=TIMEOUT) as ws:
        ws.send("auth " + RESTRICTED_TOKEN)
        answers = [_recv(ws) for _ in range(3)]
    assert answers[2] == "auth failed"


def test_console_scope_only_gets_no_cpu_and_no_other_users(tmp_path: Path) -> None:
    accounts = json.loads(json.dumps(DEMO_ACCOUNTS))
    accounts["users"][0]["tokens"].append({"value": "consoleonly0123456789", "websockets": ["console"]})
    with running_standin(accounts, tmp_path / "s.sqlite3") as standin:
        standin.set_tick_seconds(0.02)
        uid, bob = _user_id(standin, ALICE), _user_id(standin, BOB)
        with connect(standin.socket_url, open_timeout=TIMEOUT) as ws:
            ws.send("auth consoleonly0123456789")
            ws.send(f"subscribe user:{uid}/cpu")
            ws.send(f"subscribe user:{bob}/console")
            ws.send(f"subscribe user:{uid}/console")
            messages = _channel_messages(ws, 5)
    assert {m[0] for m in messages} == {f"user:{uid}/console"}


def test_sockjs_form_frames_messages(standin: StandIn) -> None:
    url = standin.socket_url.replace("/socket/websocket", "/socket/123/abcdefgh/websocket")
    with connect(url, open_timeout=TIMEOUT) as ws:
        assert _recv(ws) == "o"
        assert json.loads(_recv(ws)[1:])[0].startswith("time ")
        ws.send(json.dumps(["auth " + FULL_TOKEN]))
        assert _recv(ws) == 'a["protocol 14"]'
        assert json.loads(_recv(ws)[1:])[0].startswith("auth ok")


def test_paused_game_sends_no_ticks_and_control_route_sets_rate(standin: StandIn) -> None:
    answer = httpx.post(standin.url + "/__standin__/ticks", json={"seconds": 0})
    assert answer.json()["ok"] == 1
    uid = _user_id(standin, ALICE)
    with connect(standin.socket_url, open_timeout=TIMEOUT) as ws:
        ws.send("auth " + FULL_TOKEN)
        ws.send(f"subscribe user:{uid}/console")
        for _ in range(3):
            _recv(ws)
        with pytest.raises(TimeoutError):
            ws.recv(timeout=0.3)
    bad = httpx.post(standin.url + "/__standin__/ticks", json={"seconds": -1})
    assert bad.status_code == 400
    rule = httpx.post(standin.url + "/__standin__/console", json={"username": ALICE, "log": "not a list"})
    assert rule.status_code == 400
    assert "log" in rule.json()["error"]


def test_other_paths_are_refused_and_oversized_messages_close(standin: StandIn) -> None:
    with pytest.raises(InvalidStatus):
        connect(standin.socket_url.replace("/socket/websocket", "/nope"), open_timeout=TIMEOUT)
    with connect(standin.socket_url, open_timeout=TIMEOUT) as ws:
        ws.send("x" * 100_000)
        with pytest.raises(ConnectionClosed):
            _drain(ws)


def _drain(ws: ClientConnection) -> None:
    for _ in range(5):
        ws.recv(timeout=TIMEOUT)


def test_sockets_beyond_the_cap_are_refused_and_unauthenticated_ones_closed(standin: StandIn) -> None:
    standin.app.sockets.max_sockets = 2
    with connect(standin.socket_url, open_timeout=TIMEOUT) as first, connect(standin.socket_url, open_timeout=TIMEOUT):
        assert _recv(first).startswith("time ")
        with pytest.raises(InvalidStatus):
            connect(standin.socket_url, open_timeout=TIMEOUT)
    for _ in range(200):  # closed sockets leave room again
        if standin.app.sockets.open_sockets() == 0:
            break
        time.sleep(0.01)
    assert standin.app.sockets.open_sockets() == 0


def test_auth_must_come_in_time(standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gitops.standin.socket.AUTH_TIMEOUT", 0.2)
    with connect(standin.socket_url, open_timeout=TIMEOUT) as ws, pytest.raises(ConnectionClosed) as closed:
        _drain(ws)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4001


def _console_after(ws: ClientConnection, uid: str, wait: float) -> None:
    """Authenticate on ``ws``, let ``wait`` seconds pass, then subscribe and insist on a console message: one that
    the server sent after the wait, on a socket still open."""
    assert _recv(ws).startswith("time ")
    ws.send("auth " + FULL_TOKEN)
    assert _recv(ws) == "protocol 14"
    assert _recv(ws).startswith("auth ok ")
    time.sleep(wait)
    ws.send(f"subscribe user:{uid}/console")
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        text = _recv(ws)
        if text.startswith(f'["user:{uid}/console"'):
            return
    raise AssertionError("no console message after the wait")


def test_the_header_deadline_never_fires_into_a_game_socket(tmp_path: Path) -> None:
    # The header deadline of the HTTP server was never cancelled for a websocket upgrade: it wrote "HTTP/1.1 408"
    # into every open game socket after 5 s. With the deadline at 0.3 s, a socket three deadlines old still works.
    with running_standin(DEMO_ACCOUNTS, tmp_path / "s.sqlite3", bounds=ServiceBounds(header_timeout=0.3)) as standin:
        standin.set_tick_seconds(0.05)
        with connect(standin.socket_url, open_timeout=TIMEOUT) as ws:
            _console_after(ws, _user_id(standin, ALICE), 1.0)


def test_no_408_bytes_arrive_on_the_wire_after_the_header_deadline(tmp_path: Path) -> None:
    # The raw bytes, without a websocket client in between that might hide them.
    with (
        running_standin(DEMO_ACCOUNTS, tmp_path / "s.sqlite3", bounds=ServiceBounds(header_timeout=0.3)) as standin,
        socket.create_connection(("127.0.0.1", int(standin.url.rsplit(":", 1)[1])), timeout=TIMEOUT) as raw,
    ):
        standin.set_tick_seconds(0)  # no ticks: after the greetings, nothing at all should come
        key = base64.b64encode(b"0123456789abcdef").decode()
        raw.sendall(
            b"GET /socket/websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: " + key.encode() + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        received = b""
        deadline = time.monotonic() + 1.2  # four header deadlines
        while time.monotonic() < deadline:
            raw.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = raw.recv(4096)
            except TimeoutError:
                continue
            if not chunk:
                break
            received += chunk
    assert received.startswith(b"HTTP/1.1 101")
    assert b"408" not in received
    assert b"protocol 14" in received  # the greetings, as websocket frames


@pytest.mark.long
def test_a_game_socket_stays_open_and_streams_the_console_for_a_minute(standin: StandIn) -> None:
    # As on the real server, which keeps the socket while the client is there (verify watches for minutes).
    standin.set_tick_seconds(0.5)
    with connect(standin.socket_url, open_timeout=TIMEOUT) as ws:
        _console_after(ws, _user_id(standin, ALICE), 60.0)


@pytest.mark.parametrize("path", ["/socket/websocket/", "/socket/123/abcdefgh/websocket/"])
def test_socket_paths_with_a_trailing_slash_connect(standin: StandIn, path: str) -> None:
    with connect(standin.socket_url.replace("/socket/websocket", path), open_timeout=TIMEOUT) as ws:
        first = _recv(ws)
    assert first in ("o",) or first.startswith("time ")


def test_a_sockjs_frame_that_is_not_json_closes_with_broken_framing(standin: StandIn) -> None:
    url = standin.socket_url.replace("/socket/websocket", "/socket/123/abcdefgh/websocket")
    with connect(url, open_timeout=TIMEOUT) as ws:
        assert _recv(ws) == "o"
        ws.send('"gzip on"')  # a JSON string is a command, as in sockjs-node
        ws.send("auth not-json")
        with pytest.raises(ConnectionClosed) as closed:
            _drain(ws)
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (3000, "Broken framing.")


def test_sockjs_info_lets_a_browser_client_choose_the_websocket(standin: StandIn) -> None:
    with httpx.Client(base_url=standin.url) as http:
        info = http.get("/socket/info")
        assert info.status_code == 200
        body = info.json()
        assert body["websocket"] is True
        assert body["cookie_needed"] is False
        assert body["origins"] == ["*:*"]
        assert isinstance(body["entropy"], int)
        assert info.headers["access-control-allow-origin"] == "*"
        cors = http.get("/socket/info/", headers={"Origin": "http://localhost:8080"})
        assert cors.headers["access-control-allow-origin"] == "http://localhost:8080"
        assert cors.headers["access-control-allow-credentials"] == "true"
        assert http.options("/socket/info").status_code == 204
        assert http.get("/socket").text == "Welcome to SockJS!\n"
        assert http.get("/socket/websocket").status_code == 400  # without the upgrade


def test_a_subscription_before_auth_gets_nothing_on_purpose(standin: StandIn) -> None:
    # The real server streams any user's console to a socket that never authenticated (anyone knowing the id reads
    # it); the stand-in does not, and docs/serve.md says so.
    standin.set_tick_seconds(0.02)
    uid = _user_id(standin, ALICE)
    with connect(standin.socket_url, open_timeout=TIMEOUT) as ws:
        ws.send(f"subscribe user:{uid}/console")
        assert _recv(ws).startswith("time ")
        assert _recv(ws) == "protocol 14"
        with pytest.raises(TimeoutError):
            ws.recv(timeout=0.3)  # fifteen ticks, no message
        ws.send("auth " + FULL_TOKEN)
        assert _recv(ws).startswith("auth ok ")
        ws.send(f"subscribe user:{uid}/console")
        assert _channel_messages(ws, 1)[0][0] == f"user:{uid}/console"
