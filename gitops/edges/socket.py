"""The game socket: read an account's console (and CPU) for a bounded time, with the token never in any output.

The protocol (``@screeps/backend``'s ``lib/game/socket/server.js``; public clients agree): a websocket at
``{base}/socket/websocket`` (SockJS's raw websocket: one message per frame). The server says ``time N`` and
``protocol N``; the client sends ``auth TOKEN`` (``auth ok NEWTOKEN`` or ``auth failed``), then ``subscribe
user:<id>/console``. Channel messages are ``["CHANNEL", {...}]``, possibly ``gz:`` + base64 of deflated JSON; the
SockJS framing (``o``, ``h``, ``a[...]``, ``c[...]``) is read too, in case a server or proxy only offers that form.

Everything is bounded (each receive by the deadline, messages by :data:`MAX_MESSAGE` bytes, inflated ones by
:data:`MAX_INFLATED`, their number by the caller), and the token is never logged: the websockets library's logger
gets this module's redacting filter, and ``NEWTOKEN`` is registered as a secret. The socket never follows a redirect
(the library would follow a 3xx to any host and send ``auth TOKEN`` there): the tool opens the TCP connection itself
and hands it over, and a 3xx is a :class:`SocketProblem`. The server's texts in a problem are redacted and inert.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import re
import socket
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.sync.client import ClientConnection, connect

from gitops.core.health import ConsoleEvent, console_event, console_text
from gitops.edges.redactlog import scrub_logger
from gitops.edges.tls import trust_context
from gitops.inert import inert
from gitops.secrets import Secret, redact, register

log = logging.getLogger("gitops.socket")

MAX_MESSAGE = 1024 * 1024
MAX_INFLATED = 4 * 1024 * 1024
#: With a ``stop`` question (a SIGINT/SIGTERM during a verification), the longest single wait for a message.
STOP_POLL = 0.2

#: Seconds to wait for the socket to open and for the answer to ``auth``, at most (less when the deadline is nearer).
OPEN_TIMEOUT = 15.0


#: The token in an ``auth`` command, and the fresh one in ``auth ok`` (logged as received, before it is known).
_AUTH_FRAME = re.compile(r"(auth(?: ok)? )[^\s'\"\]]+")


# The websockets library logs every frame at DEBUG (``> TEXT 'auth ...'``): every record is scrubbed.
scrub_logger("gitops.socket.wire", lambda text: _AUTH_FRAME.sub(r"\1<hidden>", text))
_wire_log = logging.getLogger("gitops.socket.wire")


class SocketProblem(Exception):
    """The socket could not be used: the health is then unknown, for this reason (redacted, no token)."""


@dataclass(frozen=True, slots=True)
class ChannelMessage:
    channel: str
    data: Any


def socket_url(base_url: str) -> str:
    """The raw websocket's address for a server's base address (``https://screeps.com/season`` →
    ``wss://screeps.com/season/socket/websocket``)."""
    base = base_url.strip().rstrip("/")
    if base.lower().startswith("https://"):
        return "wss://" + base[8:] + "/socket/websocket"
    if base.lower().startswith("http://"):
        return "ws://" + base[7:] + "/socket/websocket"
    raise SocketProblem(f"'{redact(base)}' is not an http(s) address")


def parse_frame(text: str) -> list[str]:
    """The server strings in one websocket message: SockJS frames unwrapped, anything else as it is."""
    if text in ("o", "h"):
        return []
    if text.startswith("a["):
        try:
            items = json.loads(text[1:])
        except ValueError:
            return []
        return [x for x in items if isinstance(x, str)] if isinstance(items, list) else []
    if text.startswith("c["):
        raise SocketProblem(f"the server closed the socket: {shown(text[1:200])}")
    return [text]


def shown(text: str) -> str:
    """A server's text in a problem's message: redacted, on one line, inert."""
    return inert(redact(text), one_line=True)


def parse_message(text: str) -> ChannelMessage | None:
    """A channel message (``gz:`` inflated), or ``None`` for the greetings and anything unknown."""
    if text.startswith("gz:"):
        try:
            packed = base64.b64decode(text[3:], validate=False)
            inflater = zlib.decompressobj()
            raw = inflater.decompress(packed, MAX_INFLATED)
        except (binascii.Error, zlib.error):
            return None
        if inflater.unconsumed_tail:
            return None  # larger than MAX_INFLATED: dropped, never held
        text = raw.decode("utf-8", errors="replace")
    if not text.startswith("["):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, list) and len(data) == 2 and isinstance(data[0], str):
        return ChannelMessage(data[0], data[1])
    return None


def _redirect(exc: BaseException) -> str | None:
    """``302 to LOCATION`` when the upgrade was answered with a redirect (websockets raises the 3xx itself, or,
    given a connection of its caller, a ``ValueError`` caused by it), else ``None``."""
    for found in (exc, exc.__cause__):
        if isinstance(found, InvalidStatus) and 300 <= found.response.status_code < 400:
            location = found.response.headers.get("Location", "")
            return f"{found.response.status_code} to {shown(location[:200]) or 'nowhere'}"
    return None


class GameSocket:
    """One authenticated socket to one account's channels. Use as a context manager; closed on exit."""

    def __init__(
        self,
        url: str,
        token: Secret,
        *,
        deadline: float,
        debug: Callable[[str], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ):
        self._url = url
        self._token = token
        self._deadline = deadline
        self._debug = debug
        #: Asked between receives (each at most :data:`STOP_POLL` s then): true ends the reading as the deadline does.
        self._stop = stop
        self._ws: ClientConnection | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> GameSocket:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _left(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    def _say(self, text: str) -> None:
        if self._debug is not None:
            self._debug(redact(text))

    def open(self) -> None:
        """Connect and authenticate; :class:`SocketProblem` saying why not."""
        wait = min(OPEN_TIMEOUT, self._left())
        where = redact(self._url)
        try:
            parts = urlsplit(self._url)
            port = parts.port or (443 if parts.scheme == "wss" else 80)
            # The tool's own connection to the manifest's host: websockets cannot follow a redirect with it.
            sock = socket.create_connection((parts.hostname or "", port), timeout=max(wait, 0.01))
        except ValueError as exc:  # a port out of range
            raise SocketProblem(f"the socket address {where} is not valid") from exc
        except TimeoutError as exc:
            raise SocketProblem(f"the socket at {where} did not open within {wait:g} s") from exc
        except OSError as exc:
            raise SocketProblem(f"could not connect to the socket at {where} ({redact(str(exc))})") from exc
        # As websockets leaves a connection it opened itself: blocking, its own deadlines bound each wait (a release
        # that reads without waiting for the socket first would end a quiet console after `wait` seconds).
        sock.settimeout(None)
        self._stack.callback(sock.close)
        try:
            self._ws = self._stack.enter_context(
                connect(
                    self._url,
                    sock=sock,
                    # The HTTP client's trust (gitops.edges.tls), and like it a direct connection: websockets would
                    # use the system's store and a proxy named by HTTPS_PROXY.
                    ssl=trust_context() if self._url.startswith("wss://") else None,
                    proxy=None,
                    open_timeout=max(wait, 0.01),
                    close_timeout=1.0,
                    max_size=MAX_MESSAGE,
                    compression=None,
                    logger=_wire_log,
                    user_agent_header="screeps-gitops",
                )
            )
        except InvalidURI as exc:
            raise SocketProblem(f"the socket address {where} is not valid") from exc
        except TimeoutError as exc:
            raise SocketProblem(f"the socket at {where} did not open within {wait:g} s") from exc
        except OSError as exc:  # a certificate refused among them (an OSError and a ValueError)
            raise SocketProblem(f"could not connect to the socket at {where} ({redact(str(exc))})") from exc
        except (InvalidHandshake, ValueError) as exc:
            redirect = _redirect(exc)
            if redirect is not None:
                raise SocketProblem(
                    f"the server at {where} answered the socket's upgrade with a redirect ({redirect}); the game "
                    "socket never follows one (it would send the token there): set the server's url in the manifest "
                    "to the address that serves the game, or fix the redirect on the server"
                ) from exc
            if not isinstance(exc, InvalidHandshake):
                raise
            raise SocketProblem(f"the server refused the socket at {where} ({shown(str(exc))})") from exc
        self._say(f"socket: connected to {where}")
        self._send("auth " + self._token.reveal())
        auth_deadline = time.monotonic() + min(OPEN_TIMEOUT, self._left())
        for text in self._strings(auth_deadline, 100):
            if text == "auth failed":
                raise SocketProblem("the server refused the token on the game socket (auth failed)")
            if text.startswith("auth ok"):
                fresh = text[7:].strip()
                if fresh:
                    register(fresh)
                self._say("socket: authenticated")
                return
        raise SocketProblem("the server did not answer the socket's auth in time")

    def subscribe(self, channel: str) -> None:
        self._send("subscribe " + channel)
        self._say(f"socket: subscribed to {channel}")

    def _send(self, text: str) -> None:
        assert self._ws is not None
        try:
            self._ws.send(text)
        except ConnectionClosed as exc:
            raise SocketProblem(f"the server closed the socket ({exc.rcvd.code if exc.rcvd else 'no code'})") from exc

    def _strings(self, deadline: float, max_messages: int) -> Iterator[str]:
        assert self._ws is not None
        count = 0
        while count < max_messages:
            left = deadline - time.monotonic()
            if left <= 0 or (self._stop is not None and self._stop()):
                return
            try:
                message = self._ws.recv(timeout=left if self._stop is None else min(left, STOP_POLL))
            except TimeoutError:
                if self._stop is None:
                    return
                continue
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd else "no code"
                raise SocketProblem(f"the server closed the socket ({code})") from exc
            count += 1
            if isinstance(message, bytes):
                message = message.decode("utf-8", errors="replace")
            yield from parse_frame(message)

    def messages(self, max_messages: int, until: float | None = None) -> Iterator[ChannelMessage]:
        """Channel messages until the deadline (or ``until``, if sooner), at most ``max_messages`` websocket
        messages read."""
        deadline = self._deadline if until is None else min(until, self._deadline)
        for text in self._strings(deadline, max_messages):
            found = parse_message(text)
            if found is not None:
                yield found

    def close(self) -> None:
        self._ws = None
        self._stack.close()


def watch_console(
    url: str,
    token: Secret,
    user_id: str,
    *,
    seconds: float,
    on_event: Callable[[ConsoleEvent], bool],
    debug: Callable[[str], None] | None = None,
    max_messages: int = 10_000,
    stop: Callable[[], bool] | None = None,
) -> str | None:
    """Hand each console event of ``user_id`` to ``on_event`` (which keeps what it needs and says whether it has
    enough) for at most ``seconds``, or until ``stop()`` says so (a SIGINT/SIGTERM during a verification); the
    problem that cut the watch short, or ``None`` when it ran out its time, had enough or was stopped. Nothing is
    kept here: what a watch holds is ``on_event``'s to bound."""
    if not re.match(r"^[A-Za-z0-9_-]{1,64}$", user_id):
        return "the server's user id is not one the socket takes"
    channel = f"user:{user_id}/console"
    try:
        with GameSocket(url, token, deadline=time.monotonic() + seconds, debug=debug, stop=stop) as sock:
            sock.subscribe(channel)
            for message in sock.messages(max_messages):
                if message.channel != channel:
                    continue
                event = console_event(message.data)
                if event is not None and on_event(event):
                    break
    except SocketProblem as exc:
        return str(exc)
    return None


def console_events(
    url: str,
    token: Secret,
    user_id: str,
    *,
    seconds: float,
    enough: Callable[[list[ConsoleEvent]], bool],
    debug: Callable[[str], None] | None = None,
    max_messages: int = 10_000,
    stop: Callable[[], bool] | None = None,
) -> tuple[list[ConsoleEvent], str | None]:
    """Console events of ``user_id`` for at most ``seconds`` (or until ``enough(events)``), and the problem that cut
    the watch short (``None`` when it ran out its time or had enough). Keeps every event: for short reads (tests,
    a few messages); verify's watch uses :func:`watch_console` with a bounded tally."""
    events: list[ConsoleEvent] = []

    def keep(event: ConsoleEvent) -> bool:
        events.append(event)
        return enough(events)

    problem = watch_console(
        url, token, user_id, seconds=seconds, on_event=keep, debug=debug, max_messages=max_messages, stop=stop
    )
    return events, problem


__all__ = [
    "ChannelMessage",
    "GameSocket",
    "SocketProblem",
    "console_event",
    "console_events",
    "console_text",
    "parse_frame",
    "parse_message",
    "socket_url",
    "watch_console",
]
