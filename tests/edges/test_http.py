"""``gitops/edges/http.py``: one bounded exchange: the decoded body capped (a gzip bomb stops at the cap), the whole
answer inside a deadline (a server on a loopback port that trickles its body is cut off), codings undone once."""

from __future__ import annotations

import gzip
import socket
import time
import zlib

import httpx
import pytest

from gitops.edges.http import PIECE, AnswerTooLarge, Connections, DeadlinePassed, send_bounded
from tests.loopback import trickling_server


def _client(handler: object) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(handler))  # type: ignore[arg-type]


def _send(
    client: httpx.Client, url: str = "http://game.test/api", *, cap: int = 1 << 20, seconds: float = 5.0
) -> httpx.Response:
    return send_bounded(client, client.build_request("GET", url), cap=cap, deadline=time.monotonic() + seconds)


def test_the_body_is_decoded_once_and_the_coding_header_removed() -> None:
    body = b'{"ok":1}' * 1000
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=gzip.compress(body), headers={"Content-Encoding": "gzip"})

    with _client(handler) as client:
        answer = _send(client)
    assert answer.content == body
    assert "content-encoding" not in answer.headers
    assert seen[0].headers["Accept-Encoding"] == "gzip, deflate"
    assert seen[0].headers["Connection"] == "close"  # no record of connections: none is kept alive


def test_raw_deflate_is_read_too() -> None:
    squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    body = squeeze.compress(b"x" * 5000) + squeeze.flush()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"Content-Encoding": "deflate"})

    with _client(handler) as client:
        assert _send(client).content == b"x" * 5000


def test_a_gzip_bomb_stops_at_the_cap() -> None:
    bomb = gzip.compress(b"\0" * (50 * 1024 * 1024))  # 50 MiB of zeros in about 50 KB

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=bomb, headers={"Content-Encoding": "gzip"})

    with _client(handler) as client, pytest.raises(AnswerTooLarge) as refused:
        _send(client, cap=4 * PIECE)
    assert refused.value.cap == 4 * PIECE


def test_a_deadline_already_passed_sends_nothing() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    with _client(handler) as client, pytest.raises(DeadlinePassed):
        _send(client, seconds=-1)
    assert sent == []


def test_a_body_that_trickles_is_cut_off_at_the_deadline() -> None:
    started = time.monotonic()
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"
    with trickling_server(head) as url, httpx.Client() as client, pytest.raises(DeadlinePassed):
        _send(client, url + "/", seconds=0.8)
    assert time.monotonic() - started < 5  # not the million bytes' 28 hours


def test_connections_remember_the_socket_in_use() -> None:
    connections = Connections()
    assert connections.socket is None
    with socket.socket() as sock:
        connections.remember(sock)
        assert connections.socket is sock
