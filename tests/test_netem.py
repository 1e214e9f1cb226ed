"""The emulated internet path of the network benchmark (``bench/netem.py``): its arithmetic, and the proxy itself
over loopback (a request on a new connection costs two round trips, on a kept one one)."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from netem import INITIAL_WINDOW, Direction, Link, Proxy, proxy  # noqa: E402

from gitops.standin.testing import DEMO_ACCOUNTS, running_standin  # noqa: E402


def test_a_small_send_takes_its_time_on_the_wire_plus_half_a_round_trip() -> None:
    direction = Direction(rtt=0.1, rate=1e6)
    assert abs(direction.schedule(0.0, 10_000) - (0.01 + 0.05)) < 1e-9
    # The link carries one chunk at a time: the next waits for it.
    assert abs(direction.schedule(0.0, 1_000) - (0.011 + 0.05)) < 1e-9


def test_slow_start_doubles_the_window_each_round_trip_it_was_filled() -> None:
    fast = Direction(rtt=0.1, rate=1e9)  # the link is no bottleneck: the window is
    done = fast.schedule(0.0, 15 * INITIAL_WINDOW)  # rounds of 1, 2, 4, 8 windows
    assert 0.3 < done - 0.05 < 0.31
    assert fast.cwnd == 8 * INITIAL_WINDOW


def test_an_idle_connection_starts_slow_again() -> None:
    direction = Direction(rtt=0.1, rate=1e9)
    direction.schedule(0.0, 15 * INITIAL_WINDOW)
    assert direction.cwnd > INITIAL_WINDOW
    direction.schedule(5.0, 100)
    assert direction.cwnd == INITIAL_WINDOW


def test_the_proxy_costs_two_round_trips_on_a_new_connection_and_one_on_a_kept_one(tmp_path: Path) -> None:
    link = Link.of(rtt_ms=100, up_mbit=100, down_mbit=100)
    with (
        running_standin(DEMO_ACCOUNTS, tmp_path / "s.sqlite3") as standin,
        proxy(standin.url, link) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        started = time.monotonic()
        assert http.get("/api/version").json()["ok"] == 1
        new = time.monotonic() - started
        started = time.monotonic()
        assert http.get("/api/version").json()["ok"] == 1
        kept = time.monotonic() - started
    assert 0.2 <= new < 0.6, new
    assert 0.1 <= kept < 0.4, kept


def test_the_proxy_stops_clean_when_a_connection_arrives_as_it_stops(caplog: pytest.LogCaptureFixture) -> None:
    """A client connects and sends while the proxy's loop is busy, and the stop is asked for before the loop gets
    to accept it: the connection is accepted after the stop, and its tasks and sockets still end with the loop (no
    task left that asyncio reports destroyed while pending, no socket left open, nothing logged)."""
    caplog.set_level(logging.DEBUG, logger="asyncio")
    busy = threading.Event()

    def keep_busy() -> None:
        busy.set()
        time.sleep(0.3)  # the loop is held here while the client connects and the stop is asked for

    with socket.create_server(("127.0.0.1", 0)) as target:  # connects queue in its backlog; it never answers
        proxied = Proxy(target.getsockname()[:2], Link.of(20, 100, 100))
        with proxied as url:
            proxied._loop.call_soon_threadsafe(keep_busy)
            assert busy.wait(5)
            client = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=5)
            client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        client.close()
    assert not proxied._thread.is_alive()
    assert proxied._loop.is_closed()
    assert not asyncio.all_tasks(proxied._loop)
    gc.collect()  # a task left pending, or a socket left open, is reported when it is collected
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
