"""A hostile game server: a real tiny HTTP server on 127.0.0.1 that answers every request with one behaviour.

Each behaviour writes raw bytes to the socket, so it can do what no well-behaved server library would: an endless
body, a gzip bomb, one byte at a time, silence. Handler threads stop when the client goes away or the server is
closed; closing joins them, so no thread or socket outlives a test.
"""

from __future__ import annotations

import socket
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

Behaviour = Callable[[socket.socket, threading.Event], None]

_OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"


class HostileServer:
    """Serves ``behaviour`` to every connection at :attr:`url` until closed."""

    def __init__(self, behaviour: Behaviour) -> None:
        self._behaviour = behaviour
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections = 0
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="hostile-accept", daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), name="hostile-conn", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                _read_request(conn)
                self._behaviour(conn, self._stop)
            except OSError:
                pass  # the client hung up: that is how most of these answers end

    def close(self) -> None:
        self._stop.set()
        self._acceptor.join(5)
        self._listener.close()
        for thread in self._threads:
            thread.join(5)
        assert not any(t.is_alive() for t in [self._acceptor, *self._threads]), "a hostile handler did not stop"


@contextmanager
def hostile_server(behaviour: Behaviour) -> Iterator[HostileServer]:
    server = HostileServer(behaviour)
    try:
        yield server
    finally:
        server.close()


def _read_request(conn: socket.socket) -> None:
    """Read the request head and any Content-Length body (the client's requests are small)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise OSError("client closed")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        rest += chunk


# --- behaviours ---------------------------------------------------------------------------------------------


def answer(body: bytes, *, status: bytes = b"200 OK", headers: bytes = b"") -> Behaviour:
    """A complete, well-formed answer of ``body``."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        head = _OK_HEAD.replace(b"200 OK", status) + headers + b"Content-Length: %d\r\n\r\n" % len(body)
        conn.sendall(head + body)

    return behave


def huge(size: int) -> Behaviour:
    """An answer announcing ``size`` bytes of JSON string and sending them (until the client hangs up)."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(_OK_HEAD + b"Content-Length: %d\r\n\r\n" % size + b'{"ok":1,"x":"')
        block = b"a" * 65536
        sent = 13
        while sent < size and not stop.is_set():
            conn.sendall(block[: size - sent])
            sent += len(block)

    return behave


def words(size: int) -> Behaviour:
    """A text answer of ``size`` bytes of short words: within a cap, but costly to split into words whole."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        conn.sendall(head + b"Content-Length: %d\r\n\r\n" % size)
        block = b"a " * 32768
        for _ in range(size // len(block)):
            if stop.is_set():
                return
            conn.sendall(block)

    return behave


def endless_chunked(conn: socket.socket, stop: threading.Event) -> None:
    """A chunked answer that never ends."""
    conn.sendall(_OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n" % 65536 + b"[" * 65536 + b"\r\n"
    while not stop.is_set():
        conn.sendall(chunk)


@cache
def _bomb() -> bytes:
    """80 MiB of zeros, gzipped (about 360 kB): more than the largest cap."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1024 * 1024)
    return b"".join(packer.compress(block) for _ in range(80)) + packer.flush()


def gzip_bomb(conn: socket.socket, stop: threading.Event) -> None:
    """80 MiB of zeros in a small gzip answer."""
    body = _bomb()
    conn.sendall(_OK_HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def dribble(head: bytes, *, every: float = 0.1) -> Behaviour:
    """Sends ``head`` at once, then one byte every ``every`` seconds for ever (a slow-loris answer)."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head)
        while not stop.wait(every):
            conn.sendall(b"a")

    return behave


#: Headers that never end: one more byte of a header value at a time.
SLOW_HEADERS = dribble(b"HTTP/1.1 200 OK\r\nX-Slow: ")
#: Complete headers, then a body that never ends, a byte at a time.
SLOW_BODY = dribble(_OK_HEAD + b"Content-Length: 1000000\r\n\r\n" + b'{"ok":1,"x":"')


def silence(conn: socket.socket, stop: threading.Event) -> None:
    """Reads the request and never answers."""
    stop.wait(30)


def kept_alive_then(body: bytes, then: Behaviour) -> Behaviour:
    """Answers the first request with ``body`` on a connection it keeps open, then reads the next request on that
    same connection and answers it with ``then``."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        conn.sendall(head + body)
        _read_request(conn)
        then(conn, stop)

    return behave
