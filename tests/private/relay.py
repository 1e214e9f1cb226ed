"""A loopback TCP relay in front of the real private server that fails chosen requests at the transport level.

The real server cannot be made to fail one upload on demand; a player meets such a failure anyway (a proxy or load
balancer answering 500, a connection lost). The relay forwards every request unchanged, one upstream connection per
request (``Connection: close``, so each answer ends with its connection), and a websocket upgrade as a plain pipe in
both directions. While :attr:`Relay.fail` names a request line (``POST /api/user/code``), each such request after
the first :attr:`Relay.spare` is answered ``500`` by the relay and never reaches the server.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

from tests.private.harness import LOOPBACK

#: How long one read from either side may wait (a test's run ends well within it).
IO_TIMEOUT = 30.0
MAX_HEAD = 64 * 1024
_BODY = b'{"error":"injected by the test relay"}'
FAILED = (
    b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
    + f"Content-Length: {len(_BODY)}\r\nConnection: close\r\n\r\n".encode()
    + _BODY
)


class Relay:
    """A relay on a free loopback port to ``upstream_port``; use :func:`relay` to run it."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = (LOOPBACK, upstream_port)
        self._listener = socket.create_server((LOOPBACK, 0))
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://{LOOPBACK}:{self.port}"
        #: The request line (method and path, without the query) to fail, or ``None``.
        self.fail: str | None = None
        #: How many of the :attr:`fail` requests still pass before the relay fails them.
        self.spare = 0
        #: Each request line seen (method and path), and each that the relay answered 500.
        self.seen: list[str] = []
        self.failed: list[str] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: set[socket.socket] = set()

    def start(self) -> None:
        self._spawn(self._accept)

    def stop(self) -> None:
        """Close the listener and every open connection; wait for every thread of the relay to end."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for sock in list(self._sockets):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        for thread in list(self._threads):
            thread.join(timeout=IO_TIMEOUT)
        alive = [t.name for t in self._threads if t.is_alive()]
        assert not alive, f"relay threads still running: {alive}"

    # --- internals ---

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _own(self, sock: socket.socket) -> socket.socket:
        sock.settimeout(IO_TIMEOUT)
        with self._lock:
            self._sockets.add(sock)
        return sock

    def _drop(self, *socks: socket.socket) -> None:
        for sock in socks:
            with self._lock:
                self._sockets.discard(sock)
            sock.close()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._spawn(self._serve, self._own(client))

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            head, rest = _read_head(client)
            if head is None:
                return
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            method, target = [*line.split(" "), "", ""][:2]
            request = f"{method} {target.split('?', 1)[0]}"
            with self._lock:
                self.seen.append(request)
                failing = request == self.fail and self.spare <= 0
                if request == self.fail and self.spare > 0:
                    self.spare -= 1
                if failing:
                    self.failed.append(request)
            if failing:
                client.sendall(FAILED)
                return
            upstream = self._own(socket.create_connection(self.upstream, timeout=IO_TIMEOUT))
            if b"\r\nupgrade: websocket" in head.lower():
                upstream.sendall(head + rest)
                self._spawn(_pipe, upstream, client)
                _pipe(client, upstream)
                return
            upstream.sendall(_closing(head) + rest)
            _pipe(client, upstream, one_way=True)  # the rest of the body, then the answer until the server closes
        except OSError:
            return
        finally:
            if upstream is not None:
                with contextlib.suppress(OSError):
                    upstream.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            self._drop(client, *([upstream] if upstream is not None else []))


def _read_head(sock: socket.socket) -> tuple[bytes | None, bytes]:
    """A request's head (up to its blank line) and what was read after it; ``None`` when the client sent none."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
        if len(data) > MAX_HEAD:
            return None, b""
    end = data.index(b"\r\n\r\n") + 4
    return data[:end], data[end:]


def _closing(head: bytes) -> bytes:
    """The request head with ``Connection: close`` (its own ``Connection`` and ``Keep-Alive`` headers dropped)."""
    lines = head[:-4].split(b"\r\n")
    kept = [lines[0], *(h for h in lines[1:] if not h.lower().startswith((b"connection:", b"keep-alive:")))]
    return b"\r\n".join([*kept, b"Connection: close"]) + b"\r\n\r\n"


def _pipe(source: socket.socket, sink: socket.socket, *, one_way: bool = False) -> None:
    """Copy ``source`` to ``sink`` until either closes; ``one_way``: ``source`` is a client whose request body may
    still come, and the answer is copied back from ``sink`` until the server closes it."""
    if one_way:
        reader = threading.Thread(target=_copy, args=(source, sink), daemon=True)
        reader.start()
        try:
            _copy(sink, source)
        finally:
            with contextlib.suppress(OSError):
                source.shutdown(socket.SHUT_RDWR)
            reader.join(timeout=IO_TIMEOUT)
        return
    _copy(source, sink)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_RDWR)


def _copy(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while True:
            chunk = source.recv(65536)
            if not chunk:
                return
            sink.sendall(chunk)


@contextlib.contextmanager
def relay(upstream_port: int) -> Iterator[Relay]:
    """A running :class:`Relay` to the loopback port ``upstream_port``, stopped on exit whatever happened."""
    running = Relay(upstream_port)
    running.start()
    try:
        yield running
    finally:
        running.stop()
