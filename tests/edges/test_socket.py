"""The game socket's edge: frames (raw and SockJS), gz: messages, console shapes, bounds, and the stand-in over
loopback."""

from __future__ import annotations

import base64
import time
import zlib

import pytest

from gitops.core.health import ConsoleEvent
from gitops.edges.socket import (
    MAX_INFLATED,
    ChannelMessage,
    GameSocket,
    SocketProblem,
    console_event,
    console_events,
    parse_frame,
    parse_message,
    socket_url,
)
from gitops.secrets import Secret
from gitops.standin.testing import ALICE, FULL_TOKEN, StandIn


def _gz(text: str) -> str:
    return "gz:" + base64.b64encode(zlib.compress(text.encode())).decode()


def test_socket_url_keeps_the_path_prefix() -> None:
    assert socket_url("https://screeps.com/season/") == "wss://screeps.com/season/socket/websocket"
    assert socket_url("http://127.0.0.1:21025") == "ws://127.0.0.1:21025/socket/websocket"
    with pytest.raises(SocketProblem):
        socket_url("ftp://x")


def test_frames_raw_and_sockjs() -> None:
    assert parse_frame("o") == []
    assert parse_frame("h") == []
    assert parse_frame('a["time 1","protocol 14"]') == ["time 1", "protocol 14"]
    assert parse_frame("auth failed") == ["auth failed"]
    with pytest.raises(SocketProblem, match="closed"):
        parse_frame('c[3000,"Go away!"]')


def test_messages_plain_and_compressed() -> None:
    message = '["user:1/console",{"messages":{"log":["a"],"results":[]}}]'
    expected = ChannelMessage("user:1/console", {"messages": {"log": ["a"], "results": []}})
    assert parse_message(message) == expected
    assert parse_message(_gz(message)) == expected
    assert parse_message("time 5") is None
    assert parse_message("gz:!!!") is None
    bomb = "gz:" + base64.b64encode(zlib.compress(b"[" + b" " * (MAX_INFLATED + 10))).decode()
    assert parse_message(bomb) is None


def test_console_shapes_are_redacted() -> None:
    Secret(FULL_TOKEN)  # registered: redact() knows it
    assert console_event({"error": f"bad {FULL_TOKEN}"}) == ConsoleEvent(error="bad <hidden>")
    assert console_event({"messages": {"log": [1, "x"], "results": []}, "shard": "shard0"}) == ConsoleEvent(
        log=("1", "x")
    )
    assert console_event({"cpu": 3}) is None
    assert console_event("nope") is None


def test_reads_the_stand_in_until_enough_and_is_bounded_in_time(standin: StandIn) -> None:
    standin.set_tick_seconds(0.02)
    standin.console_rule(ALICE, log=["hello"])
    account = standin.app.accounts.user(ALICE)
    assert account is not None
    started = time.monotonic()
    events, problem = console_events(
        standin.socket_url, Secret(FULL_TOKEN), account.user_id, seconds=30, enough=lambda e: len(e) >= 3
    )
    assert problem is None
    assert events == [ConsoleEvent(log=("hello",))] * 3
    assert time.monotonic() - started < 20  # stopped once it had enough, well before its time limit
    standin.set_tick_seconds(0)
    started = time.monotonic()
    events, problem = console_events(
        standin.socket_url, Secret(FULL_TOKEN), account.user_id, seconds=0.3, enough=lambda e: False
    )
    assert (events, problem) == ([], None)
    assert time.monotonic() - started < 10
    assert standin.app.sockets.open_sockets() == 0 or _closes_soon(standin)


def _closes_soon(standin: StandIn) -> bool:
    for _ in range(100):
        if standin.app.sockets.open_sockets() == 0:
            return True
        time.sleep(0.01)
    return False


def test_unreachable_and_refused(standin: StandIn) -> None:
    # Both answers come at once; the deadline only bounds a machine loaded by several suites (10 s was too short).
    patience = 60
    with pytest.raises(SocketProblem, match=r"could not connect|did not open"):
        GameSocket("ws://127.0.0.1:9/socket/websocket", Secret(FULL_TOKEN), deadline=time.monotonic() + patience).open()
    with (
        pytest.raises(SocketProblem, match="auth failed"),
        GameSocket(standin.socket_url, Secret("canarywrong0123456789"), deadline=time.monotonic() + patience),
    ):
        pass
