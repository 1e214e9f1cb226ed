"""Serving the stand-in with uvicorn: on a socket bound here (so port 0 works), in the foreground or a thread."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn

from gitops.standin.app import StandInApp


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; port 0 picks a free port (read it with ``getsockname``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def make_config(app: StandInApp) -> uvicorn.Config:
    # No access log: uvicorn's would print query strings, and with them '_token=' values. The app logs its own
    # lines without them. No websocket server exists, so upgrades are not offered.
    return uvicorn.Config(
        app,
        interface="asgi3",
        lifespan="off",
        ws="none",
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
