"""The stand-in's game socket: the websocket the game's client reads the console and the CPU from.

``gitops apply`` with ``verify:`` and ``gitops console`` watch the console over this socket, so the stand-in speaks
what ``@screeps/backend`` speaks (``lib/game/socket/server.js``, ``user.js``: a SockJS service under ``/socket/``)
closely enough for the tool's client and a browser's sockjs-client; :class:`SocketHub` lists the protocol. Where the
real server is unsafe the stand-in is stricter on purpose (a subscription before ``auth`` is ignored, since the real
server streams a player's console to anyone who knows their id; docs/serve.md, "Differences"), so that clients do
not learn to rely on it. The stand-in runs no code: ticks come from a clock of its own, and what "the code" prints
from rules that tests set through the control routes (:class:`ConsoleRule`). Every resource a client can make it
hold is bounded (the ``MAX_*`` constants), so that a test or a stray client cannot exhaust it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
import secrets
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from gitops.standin.accounts import Account, Token
from gitops.standin.parts import StandInParts
from gitops.standin.wire import Response

log = logging.getLogger("gitops.standin")

#: The protocol version the private server announces (``PROTOCOL`` in ``@screeps/backend``).
PROTOCOL = 14
MAX_SOCKETS = 32
MAX_CLIENT_MESSAGE = 16 * 1024
AUTH_TIMEOUT = 10.0
MAX_SUBSCRIPTIONS = 16
MAX_QUEUED = 512
#: Seconds between ticks unless a test sets it (the official server's ticks take 2-5 s; the private server's ~1 s).
TICK_SECONDS = 1.0
#: Bounds on what a test may inject.
MAX_RULES = 64
MAX_LOG_LINES = 50
MAX_LINE = 4096
MIN_TICK_SECONDS = 0.005
MAX_TICK_SECONDS = 3600.0

_AUTH_FRAME = re.compile(r"(auth(?: ok)? )[^\s'\"\]]+")


class _ScrubFrames(logging.Filter):
    """uvicorn's websocket protocol logs every frame at DEBUG to ``uvicorn.error``: never the tokens of ``auth``."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "auth" in message:
            record.msg = _AUTH_FRAME.sub(r"\1<hidden>", message)
            record.args = None
        return True


_uvicorn_log = logging.getLogger("uvicorn.error")
if not any(isinstance(f, _ScrubFrames) for f in _uvicorn_log.filters):
    _uvicorn_log.addFilter(_ScrubFrames())

# sockjs-node's routes: each allows one trailing slash.
_SOCKJS_PATH = re.compile(r"^/socket/[^/.]+/[^/.]+/websocket/?$")
_RAW_PATH = re.compile(r"^/socket/websocket/?$")
_CHANNEL = re.compile(r"^user:([^/]+)/(console|cpu|set-active-branch)$")

#: Close code and reason of sockjs-node for a client frame that is not JSON.
BROKEN_FRAMING = (3000, "Broken framing.")

_NO_CACHE = (b"cache-control", b"no-store, no-cache, no-transform, must-revalidate, max-age=0")


def socket_path_kind(path: str) -> str | None:
    """``"raw"`` for ``/socket/websocket``, ``"sockjs"`` for the SockJS form, ``None`` for any other path."""
    if _RAW_PATH.match(path):
        return "raw"
    if _SOCKJS_PATH.match(path):
        return "sockjs"
    return None


def sockjs_http(method: str, path: str, origin: str | None = None) -> Response | None:
    """sockjs-node's answer to a plain HTTP request under ``/socket``, or ``None`` for any other path.

    ``GET /socket/info`` (what sockjs-client asks first; ``websocket: true`` sends it to the websocket transport),
    ``OPTIONS /socket/info`` (its CORS preflight), the greeting at ``/socket``, and 400 for a websocket path
    requested without the upgrade. Other SockJS paths (the polling and streaming transports) are 404: the stand-in
    serves the websocket only.
    """
    bare = path.rstrip("/")
    if bare != "/socket" and not bare.startswith("/socket/"):
        return None
    cors = [(b"access-control-allow-origin", b"*")]
    if origin and origin != "null":
        cors = [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-allow-credentials", b"true"),
        ]
    if bare == "/socket" and method == "GET":
        return Response(200, b"Welcome to SockJS!\n", b"text/plain; charset=UTF-8")
    if bare == "/socket/info" and method == "GET":
        info = {"websocket": True, "origins": ["*:*"], "cookie_needed": False, "entropy": secrets.randbits(32)}
        body = json.dumps(info, separators=(",", ":")).encode("ascii")
        return Response(200, body, b"application/json; charset=UTF-8", [*cors, (b"vary", b"Origin"), _NO_CACHE])
    if bare == "/socket/info" and method == "OPTIONS":
        headers = [*cors, (b"access-control-allow-methods", b"OPTIONS, GET"), (b"access-control-max-age", b"31536000")]
        return Response(204, b"", b"text/plain; charset=UTF-8", headers)
    if socket_path_kind(path) is not None and method == "GET":
        return Response(400, b"Not a valid websocket request", b"text/plain; charset=UTF-8")
    return None


@dataclass(slots=True)
class ConsoleRule:
    """What the stand-in's "code" does each tick while a user's active world branch matches."""

    username: str
    branch: str | None = None
    contains: str | None = None
    log: tuple[str, ...] = ()
    error: str | None = None
    cpu: float | None = None
    remaining: int | None = None

    def matches(self, branch: str, modules: dict[str, object]) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.branch is not None and self.branch != branch:
            return False
        if self.contains is not None:
            return any(isinstance(v, str) and self.contains in v for v in modules.values())
        return True


def parse_rule(data: dict[str, Any]) -> ConsoleRule:
    """A rule from a control request's JSON; ``ValueError`` naming the field when it is not one."""
    username = data.get("username")
    if not isinstance(username, str) or not username:
        raise ValueError("give 'username'")

    def text(name: str) -> str | None:
        value = data.get(name)
        if value is None:
            return None
        if not isinstance(value, str) or not value or len(value) > MAX_LINE:
            raise ValueError(f"give '{name}' as a string of 1 to {MAX_LINE} characters")
        return value

    lines = data.get("log", [])
    if (
        not isinstance(lines, list)
        or len(lines) > MAX_LOG_LINES
        or not all(isinstance(x, str) and len(x) <= MAX_LINE for x in lines)
    ):
        raise ValueError(f"give 'log' as a list of at most {MAX_LOG_LINES} strings")
    ticks = data.get("ticks")
    if ticks is not None and (isinstance(ticks, bool) or not isinstance(ticks, int) or not 0 < ticks <= 10**6):
        raise ValueError("give 'ticks' as a whole number from 1 to 1000000")
    cpu = data.get("cpu")
    if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int | float) or not 0 <= cpu <= 10**4):
        raise ValueError("give 'cpu' as a number from 0 to 10000")
    return ConsoleRule(username, text("branch"), text("contains"), tuple(lines), text("error"), cpu, ticks)


@dataclass(eq=False)
class _Conn:
    kind: str
    queue: asyncio.Queue[str] = field(default_factory=lambda: asyncio.Queue(MAX_QUEUED))
    account: Account | None = None
    token: Token | None = None
    channels: set[str] = field(default_factory=set)
    gzip: bool = False

    def push(self, text: str) -> None:
        if self.queue.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                self.queue.get_nowait()
        self.queue.put_nowait(text)


class SocketHub:
    """The socket endpoint and the tick clock of one stand-in.

    ``/socket/websocket`` is SockJS's raw websocket (one message per frame, no framing); the SockJS form
    ``/socket/<3 digits>/<8 chars>/websocket`` wraps every server message in ``a["..."]`` after an ``o`` frame and
    reads client messages as JSON arrays of strings. On connect the server says ``time <ms>`` and ``protocol <n>``.
    Client commands: ``auth TOKEN`` (``auth ok NEWTOKEN`` or ``auth failed``), ``subscribe CHANNEL``, ``unsubscribe
    CHANNEL``, ``gzip on|off`` (messages then sent as ``gz:`` + base64 of deflated data when that is shorter). A
    subscription to another user's channel is silently ignored, as there, and so is one before ``auth``. A SockJS
    frame that is not JSON closes the socket with 3000 "Broken framing.", as sockjs-node does. SockJS's HTTP side is
    :func:`sockjs_http`.

    Ticks: one every ``tick_seconds`` (paused at 0). While the active world branch of a user matches a
    :class:`ConsoleRule`, each tick logs the rule's lines and, when it has one, sends the rule's error as the separate
    ``{"error": ...}`` message of a tick in which the player's code failed. Without a rule the code "runs fine": one
    console message per tick with empty arrays, and one ``{"cpu": N, "memory": BYTES}`` message per tick on
    ``user:<id>/cpu``.

    Scope: a token with ``full`` access may subscribe to everything of its user; a restricted token needs at least
    one websocket event in its scope to authenticate at all (otherwise ``auth failed``), and the event (``console``,
    ``cpu``) in its scope to receive a channel's messages.

    Bounds: at most :data:`MAX_SOCKETS` sockets at once (more are refused before the handshake), messages from
    clients of at most :data:`MAX_CLIENT_MESSAGE` bytes (uvicorn closes the socket on larger ones, 1009), ``auth``
    within :data:`AUTH_TIMEOUT` seconds, :data:`MAX_SUBSCRIPTIONS` channels per socket, and a queue of
    :data:`MAX_QUEUED` messages per socket (a client that does not read loses the oldest ticks, never the server's
    memory).
    """

    def __init__(self, app: StandInParts) -> None:
        self.app = app
        self._lock = threading.Lock()
        self.tick_seconds = TICK_SECONDS
        self.game_time = 1000
        self.rules: list[ConsoleRule] = []
        self._conns: set[_Conn] = set()
        self._ticker: asyncio.Task[None] | None = None
        #: Sockets accepted in all, for tests.
        self.accepted = 0
        #: Sockets served at once; a test sets 0 to have every socket refused at the handshake.
        self.max_sockets = MAX_SOCKETS

    # -- control (any thread) --------------------------------------------------------------------------------

    def set_tick_seconds(self, seconds: float) -> None:
        """Seconds between ticks; 0 pauses the game (no ticks at all)."""
        if seconds != 0 and not MIN_TICK_SECONDS <= seconds <= MAX_TICK_SECONDS:
            raise ValueError(f"give 'seconds' as 0 (paused) or from {MIN_TICK_SECONDS} to {MAX_TICK_SECONDS}")
        with self._lock:
            self.tick_seconds = float(seconds)

    def add_rule(self, rule: ConsoleRule) -> None:
        with self._lock:
            if len(self.rules) >= MAX_RULES:
                raise ValueError(f"at most {MAX_RULES} console rules; clear them first")
            self.rules.append(rule)

    def clear_rules(self) -> None:
        with self._lock:
            self.rules.clear()

    def open_sockets(self) -> int:
        return len(self._conns)

    # -- serving ---------------------------------------------------------------------------------------------

    async def serve(self, ws: WebSocket, kind: str) -> None:
        if len(self._conns) >= self.max_sockets:
            await ws.close(1013)  # before accept: the handshake is answered 403
            log.info("WS %s -> refused (%d sockets open)", ws.url.path, len(self._conns))
            return
        await ws.accept()
        self.accepted += 1
        conn = _Conn(kind)
        self._conns.add(conn)
        self._ensure_ticker()
        writer = asyncio.create_task(self._write(ws, conn))
        log.info("WS %s -> open", "/socket/websocket" if kind == "raw" else "/socket/.../websocket")
        try:
            if kind == "sockjs":
                await ws.send_text("o")
            conn.push(f"time {int(self.app.clock.now() * 1000)}")
            conn.push(f"protocol {PROTOCOL}")
            await self._read(ws, conn)
        except WebSocketDisconnect:
            pass
        finally:
            self._conns.discard(conn)
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer
            log.info("WS closed (%s)", conn.account.username if conn.account else "-")

    async def _read(self, ws: WebSocket, conn: _Conn) -> None:
        opened = time.monotonic()
        while True:
            if conn.account is None:
                left = AUTH_TIMEOUT - (time.monotonic() - opened)
                if left <= 0:
                    await ws.close(4001, "auth timeout")
                    return
                try:
                    async with asyncio.timeout(left):
                        text = await ws.receive_text()
                except TimeoutError:
                    await ws.close(4001, "auth timeout")
                    return
            else:
                text = await ws.receive_text()
            commands = _commands(text, conn.kind)
            if commands is None:
                await ws.close(*BROKEN_FRAMING)
                return
            for command in commands:
                self._command(command, conn)

    def _command(self, command: str, conn: _Conn) -> None:
        if command.startswith("auth "):
            token = self.app.accounts.token(command[5:].strip())
            allowed = token is not None and (token.full or bool(token.websockets))
            account = self.app.accounts.user(token.username) if token is not None and allowed else None
            if account is None or token is None:
                conn.push("auth failed")
                log.info("WS auth (-) -> failed")
                return
            conn.account, conn.token = account, token
            conn.push("auth ok " + secrets.token_hex(20))
            log.info("WS auth (%s) -> ok", account.username)
        elif command.startswith("subscribe "):
            channel = command[10:].strip()
            match = _CHANNEL.match(channel)
            if conn.account is None or conn.token is None or match is None or len(conn.channels) >= MAX_SUBSCRIPTIONS:
                return
            if match.group(1) != conn.account.user_id:
                return
            if conn.token.full or match.group(2) in conn.token.websockets:
                conn.channels.add(channel)
        elif command.startswith("unsubscribe "):
            conn.channels.discard(command[12:].strip())
        elif command == "gzip on":
            conn.gzip = True
        elif command == "gzip off":
            conn.gzip = False

    async def _write(self, ws: WebSocket, conn: _Conn) -> None:
        while True:
            text = await conn.queue.get()
            if conn.gzip and text.startswith("["):
                packed = "gz:" + base64.b64encode(zlib.compress(text.encode("utf-8"), 1)).decode("ascii")
                if len(packed) < len(text):
                    text = packed
            if conn.kind == "sockjs":
                text = "a" + json.dumps([text])
            await ws.send_text(text)

    # -- ticks -----------------------------------------------------------------------------------------------

    def _ensure_ticker(self) -> None:
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.create_task(self._tick_loop())

    async def _tick_loop(self) -> None:
        last = time.monotonic()
        while self._conns:
            with self._lock:
                interval = self.tick_seconds
            now = time.monotonic()
            if interval <= 0:
                last = now
                await asyncio.sleep(0.02)
                continue
            if now - last < interval:
                await asyncio.sleep(min(interval - (now - last), 0.05))
                continue
            last = now
            try:
                self._tick()
            except Exception:
                log.exception("the stand-in's tick failed")

    def _tick(self) -> None:
        self.game_time += 1
        by_user: dict[str, list[_Conn]] = {}
        for conn in self._conns:
            if conn.account is not None and conn.channels:
                by_user.setdefault(conn.account.user_id, []).append(conn)
        for user_id, conns in by_user.items():
            account = conns[0].account
            assert account is not None
            console, error, cpu = self._run_code(account)
            channel = f"user:{user_id}/"
            for conn in conns:
                if channel + "console" in conn.channels:
                    conn.push(json.dumps([channel + "console", console]))
                    if error is not None:
                        conn.push(json.dumps([channel + "console", {"error": error}]))
                if channel + "cpu" in conn.channels:
                    conn.push(json.dumps([channel + "cpu", {"cpu": cpu, "memory": 0}]))

    def _run_code(self, account: Account) -> tuple[dict[str, Any], str | None, float]:
        """What the user's code does this tick: its console message, its uncaught error, its CPU."""
        logs: list[str] = []
        error: str | None = None
        cpu = 1.0
        with self._lock:
            rules = [r for r in self.rules if r.username.lower() == account.username.lower()]
        if rules:
            active = next((b for b in self.app.store.branches(account.username) if b.active_world), None)
            if active is not None:
                modules = active.modules()
                with self._lock:
                    for rule in rules:
                        if not rule.matches(active.name, modules):
                            continue
                        if rule.remaining is not None:
                            rule.remaining -= 1
                        logs.extend(rule.log)
                        error = rule.error if rule.error is not None else error
                        cpu = rule.cpu if rule.cpu is not None else cpu
        return {"messages": {"log": logs, "results": []}}, error, cpu


def _commands(text: str, kind: str) -> list[str] | None:
    """The commands in one client message: the text itself on the raw socket, a JSON array's strings (or a JSON
    string) on SockJS; ``None`` for a SockJS frame that is not JSON (sockjs-node closes the socket then)."""
    if kind == "raw":
        return [text]
    if not text:
        return []  # sockjs-node ignores an empty frame
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, str):
        return [data]
    if isinstance(data, list):
        return [x for x in data if isinstance(x, str)]
    return []


__all__ = ["BROKEN_FRAMING", "ConsoleRule", "SocketHub", "parse_rule", "socket_path_kind", "sockjs_http"]
