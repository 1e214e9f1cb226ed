"""``gitops/app/serverprobe.py``: init's one question to a private server, ``GET /api/version``, asked of the
stand-in on a loopback port; anything but a whole JSON object in time is no answer."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from gitops.app.serverprobe import PROBE_SECONDS, probe_version
from gitops.standin.testing import StandIn


def test_the_servers_version_object(standin: StandIn) -> None:
    answer = probe_version(standin.url + "/")
    assert isinstance(answer, dict)
    assert answer.get("ok") == 1
    assert standin.count("GET /api/version") == 1


def test_nobody_listening_is_no_answer() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert probe_version(f"http://127.0.0.1:{port}") is None


@pytest.fixture
def slow_server() -> Iterator[str]:
    """Headers at once, then a body that never ends, a byte at a time."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
            while not stop.wait(0.1):
                try:
                    conn.sendall(b" ")
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        server.close()


def test_an_answer_that_does_not_come_whole_in_time_is_no_answer(slow_server: str) -> None:
    started = time.monotonic()
    assert probe_version(slow_server) is None
    assert time.monotonic() - started < PROBE_SECONDS + 2
