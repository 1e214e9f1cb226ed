"""``gitops/app/serverprobe.py``: init's one question to a private server, ``GET /api/version``, asked of the
stand-in on a loopback port; anything but a whole JSON object in time is no answer."""

from __future__ import annotations

import time

from gitops.app.serverprobe import PROBE_SECONDS, probe_version
from gitops.standin.testing import StandIn
from tests.loopback import closed_port, trickling_server


def test_the_servers_version_object(standin: StandIn) -> None:
    answer = probe_version(standin.url + "/")
    assert isinstance(answer, dict)
    assert answer.get("ok") == 1
    assert standin.count("GET /api/version") == 1


def test_nobody_listening_is_no_answer() -> None:
    assert probe_version(f"http://127.0.0.1:{closed_port()}") is None


def test_an_answer_that_does_not_come_whole_in_time_is_no_answer() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
    started = time.monotonic()
    with trickling_server(head) as url:
        assert probe_version(url) is None
    assert time.monotonic() - started < PROBE_SECONDS + 2
