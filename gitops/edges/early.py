"""A server's TCP connection opened early, while the tool is still starting (issue 23).

Between the validated manifest (which names the servers) and a plan's first request, a run imports the HTTP
client, reads the credentials and opens the ledgers: about 0.1 s on a small machine, during which the network is
idle. On an internet path the first request then pays the TCP handshake's round trip (80 ms at RTT 80 ms) on top.
:class:`EarlyConnection` starts that handshake in a helper thread as soon as planning begins, so that it runs
during the imports; the client's connection pool then takes the connected socket instead of connecting itself
(:class:`EarlyBackend`, an httpcore network backend).

What it does not change: nothing is sent on the early socket before the client's own first request (a handshake
only: no bytes, no TLS, no credentials), and TLS, the request's deadline and its watchdog work as on any connection
the pool opens (the pool reports the socket through the same ``trace`` event). It is used once, by the first
connection the client opens to the same host and port; a later connection (after the server closed the first, or
a retry) connects as usual. A failed early connect is reported as the pool's own connect would report it
(``ConnectError``/``ConnectTimeout``), so messages and retries are unchanged. A socket nobody takes is closed when
the session closes. Only this module and :class:`gitops.app.session.Session` use it; it imports only the standard
library, so that starting it costs nothing before the HTTP library is loaded.
"""

from __future__ import annotations

import socket
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gitops.edges.threads import start_quiet

if TYPE_CHECKING:
    import httpcore
    import httpx

#: The longest the early connect may take (seconds); the client's requests have their own, shorter deadlines and
#: wait for the early connect at most as long as their connect timeout.
CONNECT_SECONDS = 30.0


def address_of(url: str) -> tuple[str, int] | None:
    """The host and port a client of ``url`` connects to; ``None`` for what it cannot tell (no host, a bad port)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not parts.hostname or scheme not in ("http", "https"):
        return None
    return parts.hostname, port or (443 if scheme == "https" else 80)


class EarlyConnection:
    """One TCP connection to ``address``, being opened by a helper thread from the moment it is made."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._socket: socket.socket | None = None
        self._error: OSError | None = None
        self._given = False  # taken by the pool, or closed: a socket made after this is closed at once
        start_quiet(threading.Thread(target=self._connect, name="gitops-early-connect", daemon=True))

    def _connect(self) -> None:
        try:
            made = socket.create_connection(self.address, CONNECT_SECONDS)
            made.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            self._error = exc
        else:
            with self._lock:
                if self._given:
                    made.close()
                else:
                    self._socket = made
        finally:
            self._done.set()

    def take(self, address: tuple[str, int], timeout: float | None) -> socket.socket | None:
        """The connected socket, the first time it is asked for ``address``; ``None`` otherwise (another address, a
        second call, or no answer within ``timeout``: the caller connects as usual). The early connect's error is
        raised (an :class:`OSError`; ``socket.timeout`` for a timeout)."""
        with self._lock:
            if self._given or address != self.address:
                return None
        finished = self._done.wait(timeout)
        with self._lock:
            if self._given:
                return None
            self._given = True
            taken, self._socket = self._socket, None
        if not finished:
            return None
        if taken is None and self._error is not None:
            raise self._error
        if taken is not None:
            taken.settimeout(None)  # the pool sets a timeout per operation
        return taken

    @property
    def taken(self) -> bool:
        """Whether the pool took the connection (or it was closed)."""
        return self._given

    def close(self) -> None:
        """Close the socket unless it was taken; a connect still under way closes its socket when it ends."""
        with self._lock:
            self._given = True
            left, self._socket = self._socket, None
        if left is not None:
            left.close()


def use_early(transport: httpx.HTTPTransport, early: EarlyConnection) -> None:
    """Make ``transport``'s connection pool take ``early``'s socket for its first connection to that address.

    httpx has no public way to give its transport a network backend, so the pool's is replaced (httpcore's
    ``ConnectionPool._network_backend``, read by every connection it makes). Should a later httpx not have it, the
    early connection is closed and the pool connects as usual (``tests/test_early_connection.py`` notices)."""
    pool = getattr(transport, "_pool", None)
    if pool is None or not hasattr(pool, "_network_backend"):
        early.close()
        return
    pool._network_backend = early_backend(early)  # private: see the docstring


def early_backend(early: EarlyConnection) -> httpcore.NetworkBackend:
    """An httpcore network backend that uses ``early``'s socket for its first matching connect (else connects as
    httpcore's own synchronous backend does)."""
    import httpcore
    from httpcore._backends.sync import SyncStream

    class EarlyBackend(httpcore.SyncBackend):
        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> httpcore.NetworkStream:
            if local_address is None and not socket_options:
                try:
                    taken = early.take((host, port), timeout)
                except TimeoutError as exc:  # socket.timeout: as httpcore's own connect maps it
                    raise httpcore.ConnectTimeout(str(exc)) from exc
                except OSError as exc:
                    raise httpcore.ConnectError(str(exc)) from exc
                if taken is not None:
                    return SyncStream(taken)
            return super().connect_tcp(host, port, timeout, local_address, socket_options)

    return EarlyBackend()
