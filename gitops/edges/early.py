"""A server's TCP (and TLS) connection opened while the tool is still starting, and the branch list sent on it.

Between the validated manifest and a plan's first request the network is idle while the run imports the HTTP
client and opens the ledgers. :class:`EarlyConnection` runs the handshakes in a helper thread meanwhile, and the
client's pool takes the connected socket (:mod:`gitops.edges.earlypool`). With a token, the branch list may be
written on it at once (:meth:`EarlyConnection.send_ahead`, only on a finished TLS connection over ``https://``):
the client's first request, when it is that same request (:func:`same_request`), is not written again; any other
gets a new connection, and the one sent ahead is still counted. A plain ``200`` answer may be read here without the
client (:meth:`EarlyConnection.answer_ahead`); anything else stays on the connection for the client, which reads it
from its first byte, so its errors, retries and messages are those of any request. The parser is this narrow
rather than h11 because it accepts one shape and hands every other to the client. Standard library only: starting
it costs nothing before the HTTP library is loaded.
"""

from __future__ import annotations

import contextlib
import errno
import re
import selectors
import socket
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from gitops.core.early import route_of
from gitops.edges.headers import INFLATED_CODINGS, KEEPALIVE_SECONDS, inflater
from gitops.edges.threads import start_quiet

if TYPE_CHECKING:
    import ssl

#: The longest the early connect may take (seconds); the client's requests have their own, shorter deadlines and
#: wait for the early connect at most as long as their connect timeout.
CONNECT_SECONDS = 30.0
#: The most bytes of an answer's head (status line and headers) read on the early connection.
HEAD_BYTES = 64 * 1024
#: The largest body read on the early connection (before and after decoding): a list without modules is a few
#: hundred bytes a branch. A larger answer is left to the HTTP client, which reads it with its own bounds.
BODY_BYTES = 8 * 1024 * 1024


def begin_connect(address: tuple[str, int]) -> socket.socket | None:
    """A TCP connect to ``address`` begun without waiting for it (a non-blocking socket), in the calling thread: a
    process about to fork, which must have one thread, can begin its connections before it
    (:func:`gitops.app.headstart.localread.read_ahead`), and the handshake then runs during the fork and the imports.
    The :class:`EarlyConnection` made with the socket waits for the connect in its helper thread.

    Only for a host that is an IP address: ``None`` for a name (resolving it could block the fork; its early
    connection resolves and connects in its helper thread as before), and for a connect that failed at once (its
    early connection connects again, and reports the error as the client's own connect would)."""
    host, port = address
    family = _address_family(host)
    if family is None:
        return None
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        sock.setblocking(False)
        code = sock.connect_ex((host, port))
    except OSError:
        code = -1
    if code not in (0, errno.EINPROGRESS):
        sock.close()
        return None
    return sock


def _address_family(host: str) -> socket.AddressFamily | None:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return family
    return None


def finish_connect(sock: socket.socket, timeout: float) -> socket.socket:
    """The connect :func:`begin_connect` began, waited for (at most ``timeout`` seconds), then made blocking and
    without Nagle's delay, as :func:`connect` makes its own. Raises the connect's error (an :class:`OSError`;
    ``socket.timeout`` for a timeout), the socket closed."""
    try:
        with selectors.DefaultSelector() as waiting:
            waiting.register(sock, selectors.EVENT_WRITE)
            if not waiting.select(timeout):
                raise TimeoutError("timed out")
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            raise OSError(code, errno.errorcode.get(code, str(code)))
        sock.setblocking(True)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock


def address_of(url: str) -> tuple[str, int] | None:
    """The host and port a client of ``url`` connects to; ``None`` for what it cannot tell (no host, a bad port)."""
    route = route_of(url)
    return route.address if route is not None else None


class Ahead(Protocol):
    """What the head start asks of a request sent ahead of the client: :class:`EarlyConnection` on a connection
    opened early, :class:`gitops.edges.service.transport.TransportAhead` through a test's transport."""

    def send_ahead(self, head: bytes, on_unclaimed: Callable[[], None]) -> None: ...

    @property
    def sent_ahead(self) -> bool: ...

    @property
    def has_request_ahead(self) -> bool: ...

    def answer_ahead(self, deadline: float, cap: int) -> PlainAnswer | None: ...

    def accept_answer(self, answer: PlainAnswer) -> None: ...

    def settle(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class EarlyTLS:
    """The TLS an early connection runs once connected: the HTTP client's context (``context`` makes it, once, in
    the helper thread; the client is given that object, :meth:`EarlyConnection.ssl_context`), the host name its
    pool gives ``start_tls`` and the protocols it offers (ALPN)."""

    context: Callable[[], ssl.SSLContext]
    server_hostname: str
    alpn: tuple[str, ...]


class EarlyConnection:
    """One TCP connection to ``address``, being opened by a helper thread from the moment it is made (or, given
    ``begun``, a connect :func:`begin_connect` began, which the helper thread waits for); given ``tls``, the TLS
    handshake run on it once connected."""

    def __init__(
        self, address: tuple[str, int], begun: socket.socket | None = None, tls: EarlyTLS | None = None
    ) -> None:
        self.address = address
        self.tls = tls
        self._begun = begun
        #: The TLS context (``tls.context()``), once made; ``_context_made`` is set when it is, or failed to be.
        self._context: ssl.SSLContext | None = None
        self._context_made = threading.Event()
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
        #: What :meth:`answer_ahead` read and was not accepted: the client's first reads get these bytes first
        #: (from ``_replayed`` on).
        self._replay = b""
        self._replayed = 0
        #: When an accepted answer left the connection idle (``time.monotonic()``), for :meth:`take`.
        self._idle_since: float | None = None
        start_quiet(threading.Thread(target=self._connect, name="gitops-early-connect", daemon=True))

    def _connect(self) -> None:
        try:
            started = time.monotonic()
            begun, self._begun = self._begun, None
            if self.tls is not None:
                self._make_context()  # CPU (the trust store) while the SYN is on its way, or before it leaves
            made: socket.socket | None = (
                finish_connect(begun, CONNECT_SECONDS) if begun is not None else connect(self.address, CONNECT_SECONDS)
            )
            if made is not None and self.tls is not None:
                made = self._handshake(made, started + CONNECT_SECONDS)
        except OSError as exc:  # ssl.SSLError too: the pool's start_tls would meet the same
            self._error = exc
        else:
            with self._lock:
                if made is None:
                    pass
                elif self._given:
                    made.close()
                else:
                    self._socket = made
                    self._write_ahead()
        finally:
            self._context_made.set()
            self._done.set()

    def _make_context(self) -> None:
        assert self.tls is not None
        try:
            context = self.tls.context()
            context.set_alpn_protocols(list(self.tls.alpn))
        except Exception:  # the client makes its own context, and meets this error itself, worded as ever
            context = None
        self._context = context
        self._context_made.set()

    def _handshake(self, sock: socket.socket, deadline: float) -> socket.socket | None:
        """``sock`` under TLS (:class:`EarlyTLS`), its handshake done by ``deadline``; ``None`` (``sock`` closed)
        when there is no context, or the connection was given up: the pool then connects and shakes hands itself."""
        assert self.tls is not None
        context = self._context
        with self._lock:
            # The TLS object is made from the context under the lock that take() gives the socket up under: a pool
            # that connects on its own after a take() that gave up sets its ALPN on this same context only after.
            if context is None or self._given:
                sock.close()
                return None
            try:
                wrapped = context.wrap_socket(
                    sock, server_hostname=self.tls.server_hostname, do_handshake_on_connect=False
                )
            except BaseException:
                sock.close()
                raise
        try:
            wrapped.settimeout(max(0.001, deadline - time.monotonic()))
            wrapped.do_handshake()
            wrapped.settimeout(None)
        except BaseException:
            wrapped.close()
            raise
        return wrapped

    def ssl_context(self, timeout: float) -> ssl.SSLContext | None:
        """The TLS context the handshake uses (:class:`EarlyTLS`), for the client's pool to use as its own: waited for
        at most ``timeout`` seconds (it is the helper's first work). ``None`` without TLS, when making it failed (the
        client makes its own, and meets the same error) or took longer (the pool's handshake then is its own: a
        socket shaken hands with another context is not taken, :class:`gitops.edges.earlypool.EarlyBackend`)."""
        if self.tls is None or not self._context_made.wait(timeout):
            return None
        return self._context

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
        # Under the lock, on a connected socket: a few hundred bytes into an empty send buffer do not block. On a
        # TLS route the socket is here only once its handshake is done (_connect): the head is never sent in clear.
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

    @property
    def has_request_ahead(self) -> bool:
        """Whether a request was handed to :meth:`send_ahead` (sent, or to be sent once connected) and is still
        pending: neither claimed by a client, nor accepted (:meth:`accept_answer`), nor counted, nor failed."""
        with self._lock:
            return self._on_unclaimed is not None and (self._ahead_sent or self._ahead is not None)

    def answer_ahead(self, deadline: float, cap: int) -> PlainAnswer | None:
        """The answer to the request sent ahead, read here without the HTTP client, when it is a plain one
        (:func:`plain_head`: ``HTTP/1.1 200``, a ``Content-Length``, no transfer coding) of at most ``cap`` bytes
        (and :data:`BODY_BYTES`) before and after decoding, whole before ``deadline`` (a :func:`time.monotonic`
        instant); ``None`` for anything else.

        Reading decides nothing: the bytes read stay here until :meth:`accept_answer`. When the caller does not
        accept them (``None``, or a body it does not take), the client that takes this connection claims the request
        as usual and reads those bytes first, then the rest from the socket: it reads, retries and words its errors
        on exactly the server's answer, as if nothing had been read before it."""
        self._done.wait(max(0.0, deadline - time.monotonic()))
        with self._lock:
            sock = self._socket
            if sock is None or not self._ahead_sent or self._on_unclaimed is None or self._replay:
                return None
        cap = min(cap, BODY_BYTES)
        read = bytearray()
        answer: PlainAnswer | None = None
        try:
            head_end = -1
            while head_end < 0 and len(read) <= HEAD_BYTES and _received(sock, read, deadline):
                head_end = read.find(b"\r\n\r\n")
            head = plain_head(bytes(read[:head_end])) if head_end >= 0 else None
            if head is not None and head.length <= cap:
                whole = head_end + 4 + head.length
                while len(read) < whole and _received(sock, read, deadline):
                    pass
                # More than its length would be bytes the server sent after its answer: not plain.
                answer = plain_answer(head, bytes(read[head_end + 4 :]), cap)
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(None)
            with self._lock:
                self._replay, self._replayed = bytes(read), 0
        return answer

    def accept_answer(self, answer: PlainAnswer) -> None:
        """The caller took ``answer`` (:meth:`answer_ahead`) as the request's: the request is counted
        (``on_unclaimed``: sent, and answered), its bytes are dropped, and the connection is left for a later client
        as an idle kept-alive one (closed now if the server said it closes it)."""
        with self._lock:
            counted, self._on_unclaimed = self._on_unclaimed, None
            self._ahead, self._replay, self._replayed = None, b"", 0
            left = None
            if answer.close:
                left, self._socket = self._socket, None
            else:
                self._idle_since = time.monotonic()
        if left is not None:
            left.close()
        if counted is not None:
            counted()

    def replayed(self, most: int) -> bytes:
        """At most ``most`` of the bytes :meth:`answer_ahead` read and nobody accepted (``b""`` when none are left):
        what the client reads first on this connection."""
        with self._lock:
            start = self._replayed
            piece = self._replay[start : start + most]
            self._replayed += len(piece)
            if self._replayed >= len(self._replay):
                self._replay, self._replayed = b"", 0
        return piece

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
        with self._lock:
            self._replay, self._replayed = b"", 0  # its answer is not read on the new connection
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
            idle = self._idle_since
        if taken is not None and idle is not None and time.monotonic() - idle > KEEPALIVE_SECONDS:
            taken.close()  # idle since its answer was read for longer than the client keeps a connection
            return None
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
            # Nothing can claim the request now: settle() needs only the callback.
            self._ahead, self._replay, self._replayed = None, b"", 0
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


def request_head(url: str, path: str, headers: Mapping[str, str]) -> bytes:
    """The head of a ``GET`` of ``path`` on the server at ``url`` (``http://host[:port][/prefix]``) with ``headers``
    (every request's: :func:`gitops.edges.headers.request_headers`), as the HTTP client writes it: ``Host`` first.
    Names and values must be ASCII."""
    parts = urlsplit(url.strip().rstrip("/"))
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None and parts.port != (443 if parts.scheme.lower() == "https" else 80):
        host = f"{host}:{parts.port}"
    fields = {"Host": host, **headers}
    lines = [f"GET {parts.path}{path} HTTP/1.1", *(f"{name}: {value}" for name, value in fields.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def same_request(first: bytes, second: bytes, *, besides: frozenset[bytes] = frozenset()) -> bool:
    """Whether two request heads (without bodies) ask the same: the same request line and the same headers with the
    same values, whatever their order and the case of their names, the fields named in ``besides`` (lower case)
    left out. Anything that is not a whole head is not."""
    parsed = _head_fields(first, besides)
    return parsed is not None and parsed == _head_fields(second, besides)


def _head_fields(head: bytes, besides: frozenset[bytes]) -> tuple[bytes, list[tuple[bytes, bytes]]] | None:
    if not head.endswith(b"\r\n\r\n"):
        return None
    line, *rest = head[:-4].split(b"\r\n")
    fields = []
    for field in rest:
        name, colon, value = field.partition(b":")
        if not colon:
            return None
        if name.strip().lower() not in besides:
            fields.append((name.strip().lower(), value.strip()))
    return line, sorted(fields)


@dataclass(frozen=True)
class PlainHead:
    """The head of a plain answer (:func:`plain_head`): its fields (names in lower case, repeated ones joined with
    ``", "``), the body's length and content coding, and whether the server closes the connection after it."""

    fields: dict[str, str]
    length: int
    coding: str
    close: bool


@dataclass(frozen=True)
class PlainAnswer:
    """An answer read on the early connection (:meth:`EarlyConnection.answer_ahead`): a ``200`` with its fields
    (:class:`PlainHead`) and its decoded body."""

    fields: Mapping[str, str]
    body: bytes
    close: bool

    # What the client's rules read of an answer (gitops.edges.service.ratelimits.Answer), as of httpx's.
    @property
    def status_code(self) -> int:
        return 200

    @property
    def headers(self) -> Mapping[str, str]:
        return self.fields

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


#: A status line this module reads: HTTP/1.1 and 200, with any reason phrase.
_STATUS_200 = re.compile(rb"HTTP/1\.1 200(?: [\t -~]*)?")
#: A header field: a token, a colon, a value of visible ASCII, spaces and tabs (no obsolete line folding).
_FIELD = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([\t -~]*?)[ \t]*")
#: The content codings decoded here (as :mod:`gitops.edges.http` decodes them); ``""`` is none.
_CODINGS = INFLATED_CODINGS | {"", "identity"}


def plain_head(head: bytes) -> PlainHead | None:
    """The head of an answer (without its ending blank line) when it is the plainest kind: ``HTTP/1.1 200``, well
    formed fields, exactly one ``Content-Length`` and no ``Transfer-Encoding``, one content coding of those asked for
    (:data:`gitops.edges.headers.ACCEPT_ENCODINGS`) or none. ``None`` for anything else, which the HTTP client reads
    instead: a parser this narrow cannot read an answer differently from it."""
    status, *lines = head.split(b"\r\n")
    if not _STATUS_200.fullmatch(status):
        return None
    fields: dict[str, str] = {}
    for line in lines:
        field = _FIELD.fullmatch(line)
        if field is None:
            return None
        name, value = field.group(1).decode("ascii").lower(), field.group(2).decode("ascii")
        fields[name] = f"{fields[name]}, {value}" if name in fields else value
    # A Content-Length given twice is joined ("2, 2") and so is not digits: exactly one, as for any repeated field.
    length = fields.get("content-length", "")
    coding = fields.get("content-encoding", "").strip().lower()
    if not length.isdigit() or "transfer-encoding" in fields or coding not in _CODINGS:
        return None
    close = "close" in (token.strip().lower() for token in fields.get("connection", "").split(","))
    return PlainHead(fields, int(length), coding, close)


def plain_answer(head: PlainHead | None, body: bytes, cap: int) -> PlainAnswer | None:
    """The answer of a plain ``head`` (:func:`plain_head`) and its ``body`` as received (all of it, and nothing
    after it), its content coding undone, when it is at most ``cap`` bytes (and :data:`BODY_BYTES`) before and after
    decoding; else ``None``. The early connection's reading, and a test transport's (issue 47), end here."""
    cap = min(cap, BODY_BYTES)
    if head is None or head.length > cap or len(body) != head.length:
        return None
    decoded = _decoded_body(body, head.coding, cap)
    return PlainAnswer(head.fields, decoded, head.close) if decoded is not None else None


def _received(sock: socket.socket, read: bytearray, deadline: float) -> bool:
    """Read what has come on ``sock`` into ``read``, waiting until ``deadline``; whether anything came (``False``
    at the deadline, the end of the connection or its error: the client meets those itself)."""
    left = deadline - time.monotonic()
    if left <= 0:
        return False
    try:
        sock.settimeout(left)
        piece = sock.recv(1 << 16)
    except OSError:  # a timeout too
        return False
    read += piece
    return bool(piece)


def _decoded_body(body: bytes, coding: str, cap: int) -> bytes | None:
    """``body`` with its content coding undone, when it decodes whole to at most ``cap`` bytes; else ``None``."""
    if coding not in INFLATED_CODINGS:
        return body
    unpack = inflater(coding)
    try:
        out = unpack.decompress(body, cap + 1)
    except zlib.error:
        if coding != "deflate":
            return None
        unpack = inflater(coding, raw=True)
        try:
            out = unpack.decompress(body, cap + 1)
        except zlib.error:
            return None
    if len(out) > cap or not unpack.eof or unpack.unused_data:
        return None
    return out
