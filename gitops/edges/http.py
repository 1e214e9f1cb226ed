"""Bounded HTTP exchanges: one request, its answer read whole with a byte cap and an overall deadline.

httpx bounds each network operation (connect, one read, one write), not a request: a server that sends one byte
every second, or an endless chunked body, holds a plain ``client.request`` forever and grows its memory without end.
:func:`send_bounded` sends with ``stream=True`` and reads the answer itself. The cap counts *decoded* bytes, so a gzip
bomb stops as soon as its output passes it: the answer is decompressed here in pieces of at most :data:`PIECE` bytes,
because httpx's decoders inflate each network read whole. The deadline covers connecting, sending, the headers and
the body: between pieces it is checked directly, and while httpx blocks on the socket a watchdog shuts the socket
down when it passes. A caller that keeps connections alive (a TLS handshake saved per request) passes a
:class:`Connections` record, from which a request over a reused connection learns its socket (httpcore's ``trace``
extension); without one, each request asks for ``Connection: close``. Over the cap or past the deadline the answer is
closed and :class:`AnswerTooLarge` or :class:`DeadlinePassed` raised; the caller words the message.
"""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

import httpx

from gitops.edges.headers import ACCEPT_ENCODINGS, INFLATED_CODINGS, inflater
from gitops.edges.jsontext import MAX_JSON_DEPTH, UnreadableJSON, parse_json
from gitops.edges.threads import start_quiet

__all__ = [
    "MAX_JSON_DEPTH",
    "PIECE",
    "AnswerTooLarge",
    "DeadlinePassed",
    "UnreadableJSON",
    "parse_json",
    "send_bounded",
]

#: The most bytes one step of decompression may produce (and so the most a bomb adds before the cap is checked).
PIECE = 64 * 1024


class AnswerTooLarge(Exception):
    """The answer's decoded body passed ``cap`` bytes; nothing more was read."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"answer larger than {cap} bytes")
        self.cap = cap


class DeadlinePassed(httpx.TimeoutException):
    """The request did not finish (headers and whole body) before its deadline.

    A :class:`httpx.TimeoutException`, so that code handling httpx's own timeouts handles this one alike.
    """


class Connections:
    """The socket of the connection a client's requests last went over, for the deadline's watchdog.

    A kept-alive connection reports its socket once, when it is made (httpcore's ``trace`` extension); the requests
    that reuse it learn it from here. One client sends one request at a time, so the last socket made is the one in
    use; a reconnect (the server closed an idle connection) reports the new one.
    """

    def __init__(self) -> None:
        self.socket: socket.socket | None = None

    def remember(self, sock: socket.socket) -> None:
        """The connection in use is now ``sock`` (one that replaced the early connection, see
        :func:`gitops.edges.earlypool.use_early`)."""
        self.socket = sock


def send_bounded(
    client: httpx.Client,
    request: httpx.Request,
    *,
    cap: int,
    deadline: float,
    connections: Connections | None = None,
) -> httpx.Response:
    """Send ``request`` with ``client`` and return the answer with its decoded body read, at most ``cap`` bytes,
    all of it before ``deadline`` (a :func:`time.monotonic` instant).

    The returned response's ``content`` is the decoded body (its ``Content-Encoding`` header removed, so nothing
    decodes it twice). Raises :class:`AnswerTooLarge`, :class:`DeadlinePassed`, or httpx's transport errors.
    """
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise DeadlinePassed("the deadline passed before the request was sent", request=request)
    if connections is None:
        # Without a record of the connections, only a new connection tells the watchdog its socket.
        request.headers["Connection"] = "close"
    request.headers["Accept-Encoding"] = ", ".join(ACCEPT_ENCODINGS)
    # No single wait may outlast the deadline either (connect, a write, one read).
    request.extensions["timeout"] = httpx.Timeout(remaining).as_dict()
    watchdog = _Watchdog(remaining, connections if connections is not None else Connections())
    request.extensions["trace"] = watchdog.trace
    watchdog.start()
    try:
        response = client.send(request, stream=True)
        try:
            body = _read(response, cap, deadline)
        finally:
            response.close()
    except httpx.TransportError as exc:
        if watchdog.fired or time.monotonic() >= deadline:
            raise DeadlinePassed("the deadline passed while the answer was read", request=request) from exc
        raise
    finally:
        watchdog.stop()
    # The raw bytes: a header value need not be ASCII, and re-encoding its decoded text could fail.
    headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-encoding"]
    return httpx.Response(
        response.status_code, headers=headers, content=body, request=request, extensions=response.extensions
    )


# --- reading ------------------------------------------------------------------------------------------------


def _read(response: httpx.Response, cap: int, deadline: float) -> bytes:
    # BytesIO hands its buffer over in getvalue() without a copy: the body is in memory once, not twice.
    body = io.BytesIO()
    for piece in _decoded(response):
        if body.tell() + len(piece) > cap:
            raise AnswerTooLarge(cap)
        body.write(piece)
        if time.monotonic() >= deadline:
            raise DeadlinePassed("the deadline passed while the answer was read", request=response.request)
    return body.getvalue()


def _decoded(response: httpx.Response) -> Iterator[bytes]:
    """The body's bytes with its ``Content-Encoding`` undone, in pieces of at most :data:`PIECE` bytes."""
    if response.is_stream_consumed:
        # A transport that hands over an answer already read (a test's httpx.MockTransport): httpx decoded it.
        yield from (response.content[i : i + PIECE] for i in range(0, len(response.content), PIECE))
        return
    codings = [c.strip().lower() for c in response.headers.get("Content-Encoding", "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    # Each piece as it arrives: iter_raw(PIECE) would gather pieces until it has PIECE bytes, and a server that
    # sends a byte at a time would hold it there, unchecked by the deadline, where no socket carries the answer (a
    # test's transport) for the watchdog to shut.
    raw: Iterator[bytes] = response.iter_raw()
    if not codings:
        for data in raw:
            yield from (data[i : i + PIECE] for i in range(0, len(data), PIECE))
        return
    # Encodings are listed in the order applied: undo the last one first.
    stream = raw
    for coding in reversed(codings):
        stream = _inflate(stream, coding)
    yield from stream


def _inflate(stream: Iterator[bytes], coding: str) -> Iterator[bytes]:
    if coding not in INFLATED_CODINGS:
        raise httpx.DecodingError(f"the answer's Content-Encoding '{coding[:40]}' was not asked for")
    unpack = inflater(coding)
    first = True
    for data in stream:
        try:
            out = unpack.decompress(data, PIECE)
        except zlib.error:
            if not (first and coding == "deflate"):
                raise httpx.DecodingError(f"the answer's {coding} data is corrupt") from None
            unpack = inflater(coding, raw=True)  # raw deflate, as some servers send it
            try:
                out = unpack.decompress(data, PIECE)
            except zlib.error:
                raise httpx.DecodingError(f"the answer's {coding} data is corrupt") from None
        first = False
        yield out
        while unpack.unconsumed_tail:
            try:
                yield unpack.decompress(unpack.unconsumed_tail, PIECE)
            except zlib.error:
                raise httpx.DecodingError(f"the answer's {coding} data is corrupt") from None
    try:
        rest = unpack.flush()
    except zlib.error:
        raise httpx.DecodingError(f"the answer's {coding} data is corrupt") from None
    # flush() is unbounded, but only returns what decompress(data, PIECE) held back: nothing, as every
    # unconsumed tail was drained above.
    yield rest


# --- the watchdog -------------------------------------------------------------------------------------------


class _Watchdog:
    """Shuts the request's socket down when the deadline passes, which wakes a read blocked in httpx."""

    def __init__(self, seconds: float, connections: Connections) -> None:
        self.fired = False
        self._lock = threading.Lock()
        self._connections = connections
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def start(self) -> None:
        start_quiet(self._timer)  # a Ctrl-C must reach the main thread, waiting in the read this timer guards

    def stop(self) -> None:
        self._timer.cancel()
        self._timer.join()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` hook: remember the connection's socket once it is made (and again after TLS)."""
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._connections.socket = sock
            fired = self.fired
        if fired:
            _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            sock = self._connections.socket
        if sock is not None:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    # socket.socket's own shutdown, also for an SSLSocket: its override drops the TLS object under the reading
    # thread's feet (a ValueError there instead of the read error that httpx turns into a transport error).
    with contextlib.suppress(OSError):  # already closed: the request has finished
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
