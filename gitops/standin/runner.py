"""Serving the stand-in with uvicorn: on a socket bound here (so port 0 works), in the foreground or a thread.

``gitops serve`` runs it in the foreground for a player; the test suites run it in a thread on an ephemeral loopback
port. The socket is bound here rather than by uvicorn so that the caller knows the port before the server starts
(port 0 picks a free one) and nothing races for it. Only this module knows uvicorn: the app
(:mod:`gitops.standin.app`) stays plain ASGI.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
import time
from collections.abc import Iterator

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from gitops.standin.app import StandInApp
from gitops.standin.bounds import HEADER_TIMEOUT
from gitops.standin.socket import MAX_CLIENT_MESSAGE


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; port 0 picks a free port (read it with ``getsockname``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class _BoundedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's header block.

    uvicorn bounds idle keep-alive connections, but its timer stops at the first byte of a request: a client sending
    its headers a byte a second would hold the connection for ever. Here the header block must be complete
    ``header_timeout`` seconds after the connection opened or the last answer was sent; otherwise the client gets
    408 and the connection is closed. (The body has its own deadline in the app, which sees the body arrive.)
    """

    header_timeout: float = HEADER_TIMEOUT

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvicorn turns its access log back on whenever the 'uvicorn.access' logger has a handler (any program that
        # configures logging gives it one, through the root logger), whatever access_log=False said; that log
        # prints the request line, and with it a token query's 'token=' value. Off here, for every connection.
        self.access_log = False
        self._header_timer: asyncio.TimerHandle | None = None
        self._cycle_at_arm: object = None
        self._header_bytes = 0
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._header_timer is not None:
            self._header_bytes += len(data)
        super().data_received(data)
        if self._header_timer is not None and self.cycle is not self._cycle_at_arm:
            self._cancel_header_timer()  # a new request's headers are complete

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        # The headers are complete and the connection is the websocket protocol's from now on: this protocol's header
        # deadline must not fire into it (it wrote "HTTP/1.1 408" into every game socket after 5 s). The game
        # socket has bounds of its own (socket.py); the real server keeps a socket open while the client is there.
        self._cancel_header_timer()
        super().handle_websocket_upgrade(event)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Unless a pipelined request already started, the next request's headers are now awaited.
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm_header_timer()

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._cycle_at_arm = self.cycle
        self._header_bytes = 0
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self._header_bytes:
            # h11 has no request to answer yet, so the answer is written as it goes on the wire.
            body = f"the request headers did not arrive within {self.header_timeout:g} s\n".encode("ascii")
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\nconnection: close\r\n\r\n" + body
            )
        self.transport.close()


def _bounded_protocol(header_timeout: float) -> type[H11Protocol]:
    return type("BoundedH11Protocol", (_BoundedH11,), {"header_timeout": header_timeout})


def make_config(app: StandInApp) -> uvicorn.Config:
    """uvicorn's configuration for ``app``, with the app's bounds (``app.bounds``) on connections and headers."""
    # No access log: uvicorn's would print query strings, and with them '_token=' values. The app logs its own
    # lines without them. uvicorn answers a request that
    # arrives while max_connections connections are open with 503 at once (limit_concurrency), so a crowd of slow
    # clients gets new requests refused quickly rather than queued, until the header deadline closes them.
    bounds = app.bounds
    return uvicorn.Config(
        app,
        http=_bounded_protocol(bounds.header_timeout),
        limit_concurrency=bounds.max_connections,
        timeout_keep_alive=bounds.keep_alive_timeout,
        interface="asgi3",
        lifespan="off",
        # The game socket (standin/socket.py); a client message above its bound closes the socket (1009).
        ws="websockets-sansio",
        ws_max_size=MAX_CLIENT_MESSAGE,
        ws_per_message_deflate=False,
        access_log=False,
        log_config=None,
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=2,
    )


class ThreadedServer(uvicorn.Server):
    """A uvicorn server that runs in a background thread and stops at once when asked."""

    def __init__(self, config: uvicorn.Config, sock: socket.socket) -> None:
        super().__init__(config)
        self._sock = sock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="gitops-standin", daemon=True)
        self._failure: BaseException | None = None

    def _run(self) -> None:
        try:
            self.run(sockets=[self._sock])
        except BaseException as exc:  # reported by start()
            self._failure = exc

    async def main_loop(self) -> None:
        # uvicorn polls should_exit every 0.1 s; waiting on an event lets stop() end the loop immediately.
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn's shutdown sleeps 0.1 s unconditionally; tests start hundreds of servers, so wait only as long as
        # open connections need to close, and abort whatever is still open after a second.
        loop = asyncio.get_running_loop()
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        deadline = loop.time() + 1.0
        while self.server_state.connections and loop.time() < deadline:
            await asyncio.sleep(0.002)
        for connection in list(self.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.abort()
        for server in self.servers:
            await server.wait_closed()

    def start(self, timeout: float = 10.0) -> None:
        """Start serving; returns once the socket accepts requests."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the stand-in did not start: {self._failure!r}")
            time.sleep(0.001)

    def stop(self) -> None:
        """Stop serving: open connections are closed, requests in progress are not waited for."""
        self.should_exit = True
        self.force_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop may already be closed
                loop.call_soon_threadsafe(wake.set)
        self._thread.join(timeout=10)


class ForegroundServer(uvicorn.Server):
    """``gitops serve``'s server: Ctrl-C or SIGTERM stop it cleanly, and the command then ends normally.

    uvicorn re-raises the signal after its shutdown, which would turn a normal stop into an "interrupted" exit and
    skip the clean-up of a temporary data file.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
