"""The game client's transport, the one seam between the client and the network, and the head start in front of it.

httpx's model: one client, and the transport the only seam. The client's requests go through the connection pool
made here (:func:`pool`), whose first connection is the one the head start opened early and on which it may have
written the branch list already (:mod:`gitops.edges.earlypool` claims it); or through a test's transport, in front
of which the head start sends its branch list the same way (:class:`TransportAhead`, :func:`in_front`): so the
in-process suite runs the head start, its claims and its ledger effects, as a run does.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

from gitops.edges.early import Ahead, EarlyConnection, PlainAnswer, plain_answer, plain_head, same_request
from gitops.edges.earlypool import use_early
from gitops.edges.headers import KEEPALIVE_SECONDS
from gitops.edges.http import Connections
from gitops.edges.tls import trust_context

__all__ = ["EARLY_CONTEXT_SECONDS", "Borrowed", "TransportAhead", "in_front", "pool"]

#: The longest a client waits for the TLS context its early connection makes first thing (the trust store); past
#: it, it makes its own, and its pool then shakes hands itself on a new connection.
EARLY_CONTEXT_SECONDS = 5.0


#: What a request sent ahead through a test's transport may differ in from the client's: ``Connection`` (the client
#: asks a test's transport to close, having no socket to keep, :func:`gitops.edges.http.send_bounded`).
_HOP_BY_HOP = frozenset({b"connection"})


class Borrowed(httpx.BaseTransport):
    """Another client's transport, lent: requests go through it, but closing this one leaves it open (its owner
    closes it). A side client (``app.headstart.sidereads``) that shares a test's injected transport with the main client
    must not close the pool under the main client's requests."""

    def __init__(self, transport: httpx.BaseTransport) -> None:
        self._transport = transport

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._transport.handle_request(request)

    def close(self) -> None:
        pass


def pool(base_url: str, early: Ahead | None, connections: Connections) -> httpx.BaseTransport:
    """The connection pool of a client of ``base_url``: TLS only for ``https://``, ``early`` (when given) as its
    first connection; each connection's socket is told to ``connections`` (the deadline's watchdog)."""
    # An idle connection is dropped after a few seconds, before servers drop theirs (Node's default is 5 s), so
    # that a request never races the server closing the connection it reuses.
    limits = httpx.Limits(keepalive_expiry=KEEPALIVE_SECONDS)
    if base_url.lower().startswith("http://"):
        # A plain-HTTP server (a private server, the stand-in) needs no TLS: httpx's default transport would
        # load the whole CA bundle into an SSL context for nothing. This context has no trust store, so the
        # client could not speak TLS to anyone even if a request went to https://.
        transport = httpx.HTTPTransport(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), limits=limits)
    else:
        # httpx's own default, made where the game socket makes its own too (one rule for both); the very
        # context the early connection's TLS handshake used, when it made one (gitops.edges.early).
        made = early.ssl_context(EARLY_CONTEXT_SECONDS) if isinstance(early, EarlyConnection) else None
        transport = httpx.HTTPTransport(verify=made or trust_context(), limits=limits)
    if isinstance(early, EarlyConnection):
        use_early(transport, early, connections.remember)
    return transport


def in_front(transport: httpx.BaseTransport, early: Ahead | None) -> httpx.BaseTransport:
    """A test's ``transport``, with the head start's request sent ahead through it (:class:`TransportAhead`) in
    front of it: the client's first request claims it."""
    return _Claiming(transport, early) if isinstance(early, TransportAhead) else transport


class TransportAhead:
    """A request sent ahead of the client through a test's transport (:class:`gitops.edges.early.Ahead`), as
    :class:`gitops.edges.early.EarlyConnection` sends it on a connection opened early: its bytes are the head
    start's (made by the code that makes every request), it is counted once (``on_unclaimed`` when nobody's request
    claims it, or its answer is accepted), and the client's first request claims it when it is the same request.

    A transport has no connection to write on early: the request goes through it the first time its answer is needed
    (the head start reads it, the client's first request claims it, or the session settles it), in that thread."""

    def __init__(self, transport: httpx.BaseTransport, url: str) -> None:
        self._transport = transport
        parts = urlsplit(url.strip())
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._lock = threading.Lock()
        self._head: bytes | None = None
        self._on_unclaimed: Callable[[], None] | None = None
        self._sent = False
        #: Its answer (status, raw headers, raw body) once sent.
        self._answer: tuple[int, list[tuple[bytes, bytes]], bytes] | None = None
        self._closed = False

    def send_ahead(self, head: bytes, on_unclaimed: Callable[[], None]) -> None:
        with self._lock:
            if not self._closed and self._head is None:
                self._head, self._on_unclaimed = head, on_unclaimed

    @property
    def sent_ahead(self) -> bool:
        return self._head is not None

    @property
    def has_request_ahead(self) -> bool:
        with self._lock:
            return self._head is not None and self._on_unclaimed is not None

    def answer_ahead(self, deadline: float, cap: int) -> PlainAnswer | None:
        with self._lock:
            if self._head is None or self._on_unclaimed is None:
                return None
            self._send(httpx.Timeout(max(0.001, deadline - time.monotonic())).as_dict())
            if self._answer is None or self._answer[0] != 200:
                return None
            _status, raw, body = self._answer
        head = plain_head(b"HTTP/1.1 200\r\n" + b"\r\n".join(name + b": " + value for name, value in raw))
        return plain_answer(head, body, cap)

    def accept_answer(self, answer: PlainAnswer) -> None:
        with self._lock:
            counted, self._on_unclaimed = self._on_unclaimed, None
            self._answer = None
        if counted is not None:
            counted()

    def claim(self, request: httpx.Request) -> httpx.Response | None:
        """The client's first request: the answer to the request sent ahead when it is the same request (``None``
        when that was not sent yet: ``request`` goes through the transport, and is it); else ``None``, the request
        sent ahead sent (when it was not) and counted, its answer dropped: the caller sends ``request``."""
        with self._lock:
            if self._head is None or self._on_unclaimed is None:
                return None
            same = same_request(self._head, _head_of(request), besides=_HOP_BY_HOP)
            if same and not self._sent:
                self._sent = True  # the client's own request is the one sent ahead: it goes now, counted by it
            self._send(request.extensions.get("timeout"))
            unclaimed, self._on_unclaimed = self._on_unclaimed, None
            answer, self._answer = self._answer, None
        if not same:
            if unclaimed is not None:
                unclaimed()
            return None
        if answer is None:
            return None
        status, raw, body = answer
        return httpx.Response(status, headers=raw, stream=httpx.ByteStream(body), request=request)

    def settle(self) -> None:
        with self._lock:
            if self._head is None or self._on_unclaimed is None:
                return
            self._send(None)
            unclaimed, self._on_unclaimed = self._on_unclaimed, None
            self._answer = None
        if unclaimed is not None:
            unclaimed()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._answer = None

    def _send(self, timeout: dict[str, float | None] | None) -> None:
        """Send the request ahead through the transport, once (under the lock), and keep its answer. When the
        transport fails it, the request is dropped, not counted: the client's own request then goes through the
        transport and meets the failure itself, worded as ever (as when an early connection fails)."""
        if self._sent or self._head is None:
            return
        self._sent = True
        line, *fields = self._head[:-4].split(b"\r\n")
        method, target, _version = line.split(b" ")
        headers = [(name.strip(), value.strip()) for name, _, value in (f.partition(b":") for f in fields)]
        request = httpx.Request(method.decode("ascii"), self._origin + target.decode("ascii"), headers=headers)
        if timeout is not None:
            request.extensions["timeout"] = timeout
        try:
            response = self._transport.handle_request(request)
            response.request = request
            try:
                if response.is_stream_consumed:  # an answer read already: its body decoded
                    raw = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-encoding"]
                    self._answer = (response.status_code, raw, response.content)
                else:
                    self._answer = (response.status_code, list(response.headers.raw), b"".join(response.iter_raw()))
            finally:
                response.close()
        except Exception:  # the client's request meets it again, through the transport
            self._head = self._on_unclaimed = None


class _Claiming(httpx.BaseTransport):
    """A test's transport with the head start in front: the first request claims the one sent ahead."""

    def __init__(self, transport: httpx.BaseTransport, ahead: TransportAhead) -> None:
        self._transport = transport
        self._ahead = ahead

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        answer = self._ahead.claim(request)
        return answer if answer is not None else self._transport.handle_request(request)

    def close(self) -> None:
        self._transport.close()


def _head_of(request: httpx.Request) -> bytes:
    """The head of ``request`` as HTTP/1.1 writes it (its body left out)."""
    lines = [request.method.encode("ascii") + b" " + request.url.raw_path + b" HTTP/1.1"]
    lines += [name + b": " + value for name, value in request.headers.raw]
    return b"\r\n".join(lines) + b"\r\n\r\n"
