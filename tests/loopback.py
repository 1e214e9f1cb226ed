"""Loopback helpers for tests of the edges: a port nobody listens on, and a server that answers too slowly.

Real sockets on 127.0.0.1, no fakes: what a test learns from them is how the tool meets a real peer that is gone or
slow (a connect refused, a body that never ends).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


def closed_port() -> int:
    """A loopback port nobody listens on (bound, read and released: free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextlib.contextmanager
def trickling_server(head: bytes) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a server that answers its first connection with ``head`` (status line, headers
    and the body's start) and then one byte every 0.1 s until the block ends; closed with its thread on exit."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(head)
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
        with contextlib.suppress(OSError), socket.create_connection(server.getsockname(), timeout=1):
            pass  # an accept still waiting (nobody connected) returns now, so the thread ends
        thread.join(5)
        server.close()
