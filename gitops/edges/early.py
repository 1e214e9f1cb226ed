"""A server's TCP connection opened early, while the tool is still starting (issue 23).

Between the validated manifest (which names the servers) and a plan's first request, a run imports the HTTP
client, reads the credentials and opens the ledgers: about 0.1 s on a small machine, during which the network is
idle. On an internet path the first request then pays the TCP handshake's round trip (80 ms at RTT 80 ms) on top.
:class:`EarlyConnection` starts that handshake in a helper thread as soon as planning begins, so that it runs
during the imports; the client's connection pool then takes the connected socket instead of connecting itself
(:class:`EarlyBackend`, an httpcore network backend).

TLS, the request's deadline and its watchdog work as on any connection the pool opens (the pool reports the socket
through the same ``trace`` event). It is used once, by the first connection the client opens to the same host and
port; a later connection (after the server closed the first, or a retry) connects as usual. A failed early connect
is reported as the pool's own connect would report it (``ConnectError``/``ConnectTimeout``), so messages and
retries are unchanged. A socket nobody takes is closed when the session closes. Only this module and
:class:`gitops.app.session.Session` use it; it imports only the standard library, so that starting it costs nothing
before the HTTP library is loaded.

The branch list sent ahead. A run whose first request to a plain-HTTP server is the branch list (every plan with a
token, :meth:`gitops.app.session.Session.send_list_ahead`) has that request written on the early socket as soon as
it is connected (:meth:`EarlyConnection.send_ahead`), before the HTTP client is imported: the answer travels while
the run is still starting. When the client then writes its first request on this connection, the two are compared
(:func:`same_request`: the same request line, and the same headers with the same values): the same request is not
written again, and the client reads the answer already on its way; its code, errors, retries, deadline and
watchdog are those of any request. Anything else (another request first, other headers after an upgrade of the
HTTP library) gets a new connection in place of this one, so that the answer to the request sent ahead cannot be
read as another's; the request sent ahead is then counted by ``on_unclaimed`` (the ledger's record of a request
sent), as it is when no client ever takes the connection (:meth:`EarlyConnection.settle`). Over TLS nothing is
sent ahead: the early socket is a TCP handshake only (no bytes, no credentials), and TLS is the pool's.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gitops.edges.headers import ACCEPT_ENCODINGS
from gitops.edges.threads import start_quiet

if TYPE_CHECKING:
    import ssl

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
        #: The request to send ahead (it carries the credentials: dropped once it is claimed or settled).
        self._ahead: bytes | None = None
        self._ahead_sent = False
        #: Called if the request sent ahead goes unclaimed; ``None`` once it was claimed or counted (or none was sent).
        self._on_unclaimed: Callable[[], None] | None = None
        start_quiet(threading.Thread(target=self._connect, name="gitops-early-connect", daemon=True))

    def _connect(self) -> None:
        try:
            made = connect(self.address, CONNECT_SECONDS)
        except OSError as exc:
            self._error = exc
        else:
            with self._lock:
                if self._given:
                    made.close()
                else:
                    self._socket = made
                    self._write_ahead()
        finally:
            self._done.set()

    def send_ahead(self, head: bytes, on_unclaimed: Callable[[], None]) -> None:
        """Send ``head`` (a whole request without a body, :func:`request_head`) on this connection as soon as it is
        made (now, if it is); ``on_unclaimed`` is called once if the client's first request on the connection turns
        out to be another, or no client takes the connection (:meth:`settle`). Nothing is sent when the connection
        was taken or closed already, or a request was sent ahead before."""
        with self._lock:
            if self._given or self._ahead is not None or self._ahead_sent:
                return
            self._ahead, self._on_unclaimed = head, on_unclaimed
            if self._socket is not None:
                self._write_ahead()

    def _write_ahead(self) -> None:
        # Under the lock, on a connected socket: a few hundred bytes into an empty send buffer do not block.
        if self._ahead is None or self._ahead_sent or self._socket is None:
            return
        try:
            self._socket.sendall(self._ahead)
        except OSError as exc:  # as a failed connect: the client's request fails (and is retried) as it would
            self._socket.close()
            self._socket, self._error, self._ahead = None, exc, None
        else:
            self._ahead_sent = True

    @property
    def sent_ahead(self) -> bool:
        """Whether a request was written ahead on this connection."""
        return self._ahead_sent

    def claim(self, head: bytes) -> bool | None:
        """The client's first write on this connection: ``True`` when it is the request sent ahead (not to be written
        again), ``False`` when it is another (``on_unclaimed`` was called; the caller must not use this connection,
        whose next answer is the one to the request sent ahead), ``None`` when nothing is pending (nothing was sent
        ahead, or this was asked before)."""
        with self._lock:
            if not self._ahead_sent or self._on_unclaimed is None:
                return None
            ahead, self._ahead = self._ahead, None
            unclaimed, self._on_unclaimed = self._on_unclaimed, None
        if ahead is not None and same_request(head, ahead):
            return True
        unclaimed()
        return False

    def settle(self) -> None:
        """Count a request sent ahead that no client's request claimed (``on_unclaimed``), once; called when the
        session ends, before its ledgers are saved."""
        with self._lock:
            if not self._ahead_sent or self._on_unclaimed is None:
                return
            self._ahead = None
            unclaimed, self._on_unclaimed = self._on_unclaimed, None
        unclaimed()

    def take(self, address: tuple[str, int], timeout: float | None) -> socket.socket | None:
        """The connected socket, the first time it is asked for ``address``; ``None`` otherwise (another address, a
        second call, or no answer within ``timeout``: the caller connects as usual). The early connect's error is
        raised (an :class:`OSError`; ``socket.timeout`` for a timeout)."""
        with self._lock:
            if self._given or address != self.address:
                return None
        self._done.wait(timeout)
        with self._lock:
            if self._given:
                return None
            self._given = True  # a connect still under way closes its socket when it ends
            taken, self._socket = self._socket, None
        if taken is not None:  # connected, if only just after the wait ended: used rather than dropped
            taken.settimeout(None)  # the pool sets a timeout per operation
            return taken
        if self._done.is_set() and self._error is not None:
            raise self._error
        return None

    @property
    def taken(self) -> bool:
        """Whether the pool took the connection (or it was closed)."""
        return self._given

    def close(self) -> None:
        """Close the socket unless it was taken; a connect still under way closes its socket when it ends."""
        with self._lock:
            self._given = True
            left, self._socket = self._socket, None
            self._ahead = None  # nothing can claim it now; settle() needs only the callback
        if left is not None:
            left.close()


def connect(address: tuple[str, int], timeout: float | None) -> socket.socket:
    """A TCP connection to ``address``, without Nagle's delay (as httpcore's own connections)."""
    made = socket.create_connection(address, timeout)
    try:
        made.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        made.close()
        raise
    return made


def request_head(url: str, path: str, headers: dict[str, str]) -> bytes:
    """The head of a ``GET`` of ``path`` on the server at ``url`` (``http://host[:port][/prefix]``) with ``headers``
    (the client's own, :data:`gitops.edges.headers.CLIENT_HEADERS`, and the credentials), as the HTTP client writes
    it: with ``Host``, ``Accept-Encoding`` and ``Connection: keep-alive``. Names and values must be ASCII."""
    parts = urlsplit(url.strip().rstrip("/"))
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None and parts.port != (443 if parts.scheme.lower() == "https" else 80):
        host = f"{host}:{parts.port}"
    fields = {
        "Host": host,
        "Accept-Encoding": ", ".join(ACCEPT_ENCODINGS),
        "Connection": "keep-alive",
        **headers,
    }
    lines = [f"GET {parts.path}{path} HTTP/1.1", *(f"{name}: {value}" for name, value in fields.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def same_request(first: bytes, second: bytes) -> bool:
    """Whether two request heads (without bodies) ask the same: the same request line and the same headers with the
    same values, whatever their order and the case of their names. Anything that is not a whole head is not."""
    parsed = _head_fields(first)
    return parsed is not None and parsed == _head_fields(second)


def _head_fields(head: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]] | None:
    if not head.endswith(b"\r\n\r\n"):
        return None
    line, *rest = head[:-4].split(b"\r\n")
    fields = []
    for field in rest:
        name, colon, value = field.partition(b":")
        if not colon:
            return None
        fields.append((name.strip().lower(), value.strip()))
    return line, sorted(fields)


def use_early(
    transport: httpx.HTTPTransport, early: EarlyConnection, on_socket: Callable[[socket.socket], None]
) -> None:
    """Make ``transport``'s connection pool take ``early``'s socket for its first connection to that address.
    ``on_socket`` is told the socket that replaces it when the client's first request is not the one sent ahead (the
    request's watchdog then shuts that one down, :class:`gitops.edges.http.Connections`).

    httpx has no public way to give its transport a network backend, so the pool's is replaced (httpcore's
    ``ConnectionPool._network_backend``, read by every connection it makes). Should a later httpx not have it, the
    early connection is closed and the pool connects as usual (``tests/test_early_connection.py`` notices)."""
    pool = getattr(transport, "_pool", None)
    if pool is None or not hasattr(pool, "_network_backend"):
        early.close()
        return
    pool._network_backend = early_backend(early, on_socket)  # private: see the docstring


def early_backend(early: EarlyConnection, on_socket: Callable[[socket.socket], None]) -> httpcore.NetworkBackend:
    """An httpcore network backend that uses ``early``'s socket for its first matching connect (else connects as
    httpcore's own synchronous backend does)."""
    import httpcore
    from httpcore._backends.sync import SyncStream

    @contextlib.contextmanager
    def connect_errors() -> Iterator[None]:
        # A connect's errors as httpcore's own connect maps them (socket.timeout is a TimeoutError).
        try:
            yield
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc

    class AheadStream(httpcore.NetworkStream):
        """The early socket with a request sent ahead: the client's first write claims it (:meth:`claim`)."""

        def __init__(self, sock: socket.socket) -> None:
            self._stream = SyncStream(sock)

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._stream.read(max_bytes, timeout)

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            claimed = early.claim(buffer) if buffer else None
            if claimed:
                return  # on the wire already: its answer is on its way
            if claimed is False:  # the answer coming on this socket is not this request's: a new connection
                self._stream.close()
                with connect_errors():
                    fresh = connect(early.address, timeout)
                on_socket(fresh)
                self._stream = SyncStream(fresh)
            self._stream.write(buffer, timeout)

        def close(self) -> None:
            self._stream.close()

        def start_tls(
            self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
        ) -> httpcore.NetworkStream:
            return self._stream.start_tls(ssl_context, server_hostname, timeout)

        def get_extra_info(self, info: str) -> Any:
            return self._stream.get_extra_info(info)

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
                with connect_errors():
                    taken = early.take((host, port), timeout)
                if taken is not None:
                    return AheadStream(taken) if early.sent_ahead else SyncStream(taken)
            return super().connect_tcp(host, port, timeout, local_address, socket_options)

    return EarlyBackend()
