"""The HTTP client's side of the early connection: the connection pool takes its socket.

:mod:`gitops.edges.early` imports only the standard library, so that it can start before the HTTP library is
loaded. This module is the part that needs httpcore (the pool's network backend), imported with the client
(:mod:`gitops.edges.service`) and never before it. A failed early connect is reported as the pool's own connect
would report it, so messages and retries are those of any connection.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Callable, Iterator
from typing import Any

import httpcore
import httpx
from httpcore._backends.sync import SyncStream

from gitops.edges.early import EarlyConnection, connect


def use_early(
    transport: httpx.HTTPTransport, early: EarlyConnection, on_socket: Callable[[socket.socket], None]
) -> None:
    """Make ``transport``'s connection pool take ``early``'s socket for its first connection to that address.
    ``on_socket`` is told the socket that replaces it when the client's first request is not the one sent ahead (the
    request's watchdog then shuts that one down, :class:`gitops.edges.http.Connections`).

    httpx has no public way to give its transport a network backend, so the pool's is replaced (httpcore's
    ``ConnectionPool._network_backend``, read by every connection it makes). Should a later httpx not have it, the
    early connection is closed and the pool connects as usual (``tests/edges/test_early.py`` notices)."""
    pool = getattr(transport, "_pool", None)
    if pool is None or not hasattr(pool, "_network_backend"):
        early.close()
        return
    pool._network_backend = EarlyBackend(early, on_socket)  # private: see the docstring


@contextlib.contextmanager
def connect_errors() -> Iterator[None]:
    """A connect's errors as httpcore's own connect maps them (socket.timeout is a TimeoutError)."""
    try:
        yield
    except TimeoutError as exc:
        raise httpcore.ConnectTimeout(str(exc)) from exc
    except OSError as exc:
        raise httpcore.ConnectError(str(exc)) from exc


class EarlyStream(httpcore.NetworkStream):
    """The early socket. With a request sent ahead, the client's first write claims it
    (:meth:`gitops.edges.early.EarlyConnection.claim`). Under TLS already on an ``https://`` route: the pool's
    ``start_tls`` returns it as it is when asked with the context and host name the handshake used
    (:class:`gitops.edges.early.EarlyTLS`), else gets a new connection with its own handshake."""

    def __init__(self, early: EarlyConnection, on_socket: Callable[[socket.socket], None], sock: socket.socket) -> None:
        self._early = early
        self._on_socket = on_socket
        self._stream: httpcore.NetworkStream = SyncStream(sock)
        #: The context and host name the pool asked for (TLS), for a new connection that replaces this one.
        self._tls: tuple[ssl.SSLContext, str | None] | None = None

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._early.replayed(max_bytes) or self._stream.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        claimed = self._early.claim(buffer) if buffer else None
        if claimed:
            return  # on the wire already: its answer is on its way
        if claimed is False:  # the answer coming on this socket is not this request's: a new connection
            self._stream.close()
            self._stream = self._fresh(timeout)
            self._on_socket(self._stream.get_extra_info("socket"))
        self._stream.write(buffer, timeout)

    def _fresh(self, timeout: float | None) -> httpcore.NetworkStream:
        """A new connection to the address, under TLS as the pool asked for it (httpcore's own handshake)."""
        with connect_errors():
            fresh = SyncStream(connect(self._early.address, timeout))
        if self._tls is None:
            return fresh
        context, hostname = self._tls
        return fresh.start_tls(context, hostname, timeout)  # closes the socket if it fails

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        early = self._early
        tls = early.tls
        if tls is None:  # a plain TCP connection taken: the pool's handshake, as on any
            return self._stream.start_tls(ssl_context, server_hostname, timeout)
        self._tls = (ssl_context, server_hostname)
        if ssl_context is early.ssl_context(0) and server_hostname == tls.server_hostname:
            return self  # the very handshake the pool asks for is done
        # Not the pool's handshake (another context or name): its own, on a new connection. A request sent ahead
        # on this one is counted as sent, and its answer never read.
        early.settle()
        self._stream.close()
        return self._fresh(timeout)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class EarlyBackend(httpcore.SyncBackend):
    """httpcore's synchronous backend, whose first connect to the early connection's address takes its socket
    (else it connects as httpcore's own does)."""

    def __init__(self, early: EarlyConnection, on_socket: Callable[[socket.socket], None]) -> None:
        self._early = early
        self._on_socket = on_socket

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        early = self._early
        if local_address is None and not socket_options:
            with connect_errors():
                taken = early.take((host, port), timeout)
            if taken is not None:
                if early.sent_ahead or early.tls is not None:
                    return EarlyStream(early, self._on_socket, taken)
                return SyncStream(taken)
        return super().connect_tcp(host, port, timeout, local_address, socket_options)
