"""The stand-in of the game service as an ASGI application.

Every request goes the same way: count it as received, apply an injected fault, find the endpoint (404), read the
body (413 above ``max_body``, 408 when it does not arrive in time), authenticate (401), check the token's scope
(403), count it against the token's rate limits (429), and only then run the endpoint's handler. No answer is ever a
traceback: a bug in a handler is logged and answered with a JSON 500. The log shows method, path, user and status,
never a query string, a token, a password or a header.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import re
import threading
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from gitops.core.endpoints import DOWNLOAD, UPLOAD, endpoint_key
from gitops.edges.clock import Clock
from gitops.standin.accounts import Account, Accounts, Token
from gitops.standin.bounds import MAX_ADVANCE_SECONDS, MAX_BODY, ServiceBounds
from gitops.standin.endpoints import ENDPOINTS, SEGMENT_ENDPOINTS, Endpoint, canonical_key, strip_world_prefix
from gitops.standin.faults import Faults
from gitops.standin.handlers import Handlers, parse_segment
from gitops.standin.inflate import TooLarge, inflate
from gitops.standin.ratelimit import RateLimiter
from gitops.standin.socket import SocketHub, parse_rule, socket_path_kind, sockjs_http
from gitops.standin.store import Store
from gitops.standin.wire import HTML_TYPE, JSON_TYPE, TEXT_TYPE, Reject, Request, Response, error, ok

log = logging.getLogger("gitops.standin")

#: Prefix of the control routes that only ``gitops serve --testing`` (and ``running_standin``) enables.
CONTROL_PREFIX = "/__standin__/"

_TOO_LARGE_PAGE = (
    b'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Error</title>\n</head>\n<body>\n'
    b"<pre>PayloadTooLargeError: request entity too large</pre>\n</body>\n</html>\n"
)

_FAULT_ANSWERS: dict[str, Response] = {
    "500": Response(500, b"Internal Server Error", TEXT_TYPE),
    "html": Response(
        502,
        b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>"
        b"<body><h1>502 Bad Gateway</h1><p>The server is temporarily unavailable.</p></body></html>\n",
        HTML_TYPE,
    ),
    "badjson": Response(200, b'{"ok":1,"modules":{"main":"module.exports.loop = function', JSON_TYPE),
}


#: How much of a refused body (413) is read and dropped before the answer, in body limits: a client sending 9 MB
#: gets its 413 whole; one announcing 1 GB is cut off at once.
DRAIN_FACTOR = 4


class _ClientGone(Exception):
    """The client disconnected before its request body arrived."""


class StandInApp:
    """The ASGI application. ``clock`` decides what "now" is for rate limits, grants and timestamps."""

    def __init__(
        self,
        accounts: Accounts,
        store: Store,
        clock: Clock,
        *,
        testing: bool = False,
        bounds: ServiceBounds | None = None,
    ) -> None:
        self.accounts = accounts
        self.store = store
        self.clock = clock
        self.testing = testing
        self.bounds = bounds or ServiceBounds()
        self.max_body = self.bounds.max_body
        self.limiter = RateLimiter(store, clock)
        self.faults = Faults()
        self._received: Counter[tuple[str, str | None]] = Counter()
        #: Request bodies by endpoint and ``Content-Encoding`` (``identity`` when none), for tests.
        self.encodings: Counter[tuple[str, str]] = Counter()
        #: Whether compressed bodies are read, as the private server's body parser reads them; tests set it to False
        #: to answer as a server that does not (415, nothing read).
        self.inflate = True
        #: Whether answers say so (``Accept-Encoding: deflate, gzip``, RFC 7694); off, a client must probe, as with
        #: the official server.
        self.advertise_encodings = True
        self._received_lock = threading.Lock()
        now_ms = int(clock.now() * 1000)
        for account in accounts.users:
            store.ensure_user(account.username, now_ms)
        self.handlers = Handlers(self)
        #: The game socket (``/socket/websocket``) and its tick clock.
        self.sockets = SocketHub(self)
        self.routes = self.handlers.routes()
        assert set(self.routes) == set(ENDPOINTS), "every endpoint needs a handler"

    # -- what tests read ------------------------------------------------------------------------------------

    def count(self, endpoint: str, username: str | None = None) -> int:
        """Requests received for ``endpoint`` (``"POST /api/user/code"``), by anyone or by ``username``'s login."""
        parts = endpoint.split()
        key = canonical_key(endpoint_key(parts[0], parts[1])) if len(parts) == 2 else endpoint
        with self._received_lock:
            return self._received[(key, username.lower() if username else None)]

    def close(self) -> None:
        """Release the data file."""
        self.store.close()

    # -- ASGI -----------------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            websocket = WebSocket(scope, receive, send)
            kind = socket_path_kind(strip_world_prefix(scope["path"]))
            if kind is None:
                await websocket.close(1008)  # before accept: the handshake is answered 403
                return
            await self.sockets.serve(websocket, kind)
            return
        if scope["type"] != "http":
            return
        method: str = scope["method"]
        path: str = scope["path"]
        user: list[str] = []
        try:
            response = await self._handle(scope, receive, send, user)
        except _ClientGone:
            return
        except Exception:
            # Only a bug gets here; the client learns nothing of it but that it is one.
            log.exception("internal error while answering %s %s", method, path)
            response = error("internal error in the stand-in (see its log)", 500)
        if response is None:
            log.info("%s %s (%s) -> connection dropped (injected fault)", method, path, _who(user))
            return
        await _respond(send, response, advertise=self.inflate and self.advertise_encodings)
        log.info("%s %s (%s) -> %d", method, path, _who(user), response.status)

    async def _handle(self, scope: Scope, receive: Receive, send: Send, user: list[str]) -> Response | None:
        method: str = scope["method"]
        if method != method.upper():
            # Node's HTTP parser refuses a method that is not upper case before any route sees it.
            return Response(400, b"Bad Request", TEXT_TYPE, [(b"connection", b"close")])
        path: str = strip_world_prefix(scope["path"])
        try:
            query, repeated = _query(scope.get("query_string", b""))
        except ValueError:
            return error("the query string has too many parameters", 400)
        headers = _headers(scope["headers"])

        if self.testing and path.startswith(CONTROL_PREFIX):
            key = canonical_key(endpoint_key(method, path))
            body = await self._read_body(headers, receive)
            if isinstance(body, Response):
                return body
            return self._control(Request(method, path, key, query, headers, body))

        sockjs = sockjs_http(method, path, headers.get("origin"))
        if sockjs is not None:
            return sockjs
        # Express routes ignore case, and take the path as sent (percent escapes not decoded); HEAD is answered as GET
        # without the body.
        raw = scope.get("raw_path")
        route = express_route(strip_world_prefix(raw.decode("latin-1")) if raw else path)
        if route is None:
            return error(f"no such endpoint: {method} {path}", 404)
        path = route
        if method == "OPTIONS":
            return _allowed_methods(path)
        key = canonical_key(endpoint_key("GET" if method == "HEAD" else method, path))
        endpoint = ENDPOINTS.get(key)
        token_value = headers.get("x-token") or query.get("_token") or None
        authorization = headers.get("authorization")
        token, account = self._identify(endpoint, token_value, authorization)
        if account is not None:
            user.append(account.username)
        with self._received_lock:
            self._received[(key, None)] += 1
            if account is not None:
                self._received[(key, account.username.lower())] += 1

        fault = self.faults.take(key)
        if fault is not None and fault.kind == "commit-drop":
            # Handled as usual (an upload takes effect), then the answer is lost: the connection closes instead.
            await self._serve(method, path, key, query, headers, receive, endpoint, account, token)
            await _drop(send)
            return None
        if fault is not None:
            if fault.kind == "delay":
                await asyncio.sleep(fault.delay_seconds)  # then answered as usual
            elif fault.kind == "drop":
                await _drop(send)
                return None
            else:
                template = _FAULT_ANSWERS[fault.kind]
                return Response(template.status, template.body, template.content_type)

        if "branch" in repeated and key == DOWNLOAD:
            # qs turns `branch=a&branch=b` into an array and `branch[$ne]=x` into an object, which the real server
            # puts into a database query as it is ("fun is not a function", or an operator that matches every
            # branch). Other parameters are read with parseInt there, which reads a list's first value, as here.
            stop = Reject("invalid params: give 'branch' once, as text (not a list or an object such as branch[$ne])")
            return await self._serve(method, path, key, query, headers, receive, endpoint, account, token, stop)
        return await self._serve(method, path, key, query, headers, receive, endpoint, account, token)

    async def _serve(
        self,
        method: str,
        path: str,
        key: str,
        query: dict[str, str],
        headers: dict[str, str],
        receive: Receive,
        endpoint: Endpoint | None,
        account: Account | None,
        token: Token | None,
        stop: Reject | None = None,
    ) -> Response:
        """Answer a request that no fault stopped: the endpoint, its body, credentials, scope, rate limit, route (or
        ``stop``, a refusal the route would have answered)."""
        if endpoint is None:
            return error(f"no such endpoint: {key}", 404)
        body = await self._read_body(headers, receive)
        if isinstance(body, Response):
            return body
        encoding = (headers.get("content-encoding") or "identity").strip().lower()
        if body:
            with self._received_lock:
                self.encodings[(key, encoding)] += 1
        if encoding != "identity" and not self.inflate:
            return error(f'unsupported content encoding "{encoding}"', 415)
        try:
            body = inflate(encoding, body, self.max_body)
        except TooLarge:
            return Response(413, _TOO_LARGE_PAGE, HTML_TYPE, [(b"connection", b"close")])
        except Reject as exc:
            return error(exc.message, exc.status)
        req = Request(method, path, key, query, headers, body, account, token)

        limited_token: str | None = None
        rate_headers: list[tuple[bytes, bytes]] = []
        try:
            if endpoint.auth != "none":
                if account is None:
                    return error("unauthorized", 401)
                if token is not None and self.limiter.unlimited_until(token.fingerprint) is None:
                    limited_token = token.fingerprint
                if token is not None and endpoint.auth != "any-token":
                    denied = _scope_problem(req, token)
                    if denied is not None:
                        return self._with_window(denied, limited_token, key)
                if limited_token is not None:
                    verdict = self.limiter.check(limited_token, key)
                    if not verdict.allowed:
                        text = f"Rate limit exceeded, retry after {verdict.retry_ms}ms"
                        return Response(429, text.encode("ascii"), TEXT_TYPE, verdict.headers())
                    rate_headers = verdict.headers()
            if stop is not None:
                raise stop
            response = self.routes[key](req)
        except Reject as exc:
            response = error(exc.message, exc.status, **exc.extra)
        if rate_headers:
            response.headers.extend(rate_headers)
            return response
        return self._with_window(response, limited_token, key)

    def _with_window(self, response: Response, token: str | None, key: str) -> Response:
        """Add the headers of the window a token-authenticated request would count against (without counting)."""
        if token is not None:
            response.headers.extend(self.limiter.peek(token, key).headers())
        return response

    def _identify(
        self, endpoint: Endpoint | None, token_value: str | None, authorization: str | None
    ) -> tuple[Token | None, Account | None]:
        """Who the request is from; ``(None, None)`` when it has no valid credentials for the endpoint.

        A token (header or query) wins over HTTP Basic; HTTP Basic counts only where the endpoint accepts it. On
        ``POST /api/user/code`` Basic wins when both are sent, as on the private server (screepsmod-auth signs the
        Basic user in there and puts that user's token in place of the one sent); a wrong password is then a 401.
        """
        if endpoint is not None and endpoint.auth == "none":
            return None, None
        if authorization and endpoint is not None and endpoint.key == UPLOAD and _is_basic(authorization):
            return None, self._basic(authorization)
        if token_value is not None:
            token = self.accounts.token(token_value)
            if token is None:
                return None, None
            return token, self.accounts.user(token.username)
        if authorization and (endpoint is None or endpoint.auth == "token-or-basic"):
            return None, self._basic(authorization)
        return None, None

    def _basic(self, authorization: str) -> Account | None:
        scheme, _, encoded = authorization.strip().partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return None
        login, sep, password = decoded.partition(":")
        if not sep:
            return None
        return self.accounts.login(login, password)

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes | Response:
        # The private server's body parser answers an HTML page (with a stack trace, left out here) and status 413.
        too_large = Response(413, _TOO_LARGE_PAGE, HTML_TYPE, [(b"connection", b"close")])
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await self._drain(receive, int(declared))
            return too_large
        chunks: list[bytes] = []
        size = 0
        timeout = self.bounds.body_timeout
        try:
            # One deadline for the whole body: a client sending a byte a second, or fewer bytes than its
            # Content-Length says, is cut off instead of holding the connection.
            async with asyncio.timeout(timeout):
                while True:
                    message: Message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _ClientGone
                    chunk: bytes = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body:
                        if message.get("more_body", False):
                            await self._drain(receive, None)
                        return too_large
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            late = error(f"the request body did not arrive within {timeout:g} s (got {size} bytes)", 408)
            late.headers.append((b"connection", b"close"))
            return late

    async def _drain(self, receive: Receive, declared: int | None) -> None:
        """Read and drop the rest of a body that is refused (413) before answering, so that the client, still
        sending, can read the answer: closing while it sends makes its kernel see a reset instead of the 413 (a
        lingering close). Bounded: at most :data:`DRAIN_FACTOR` times the body limit, or a declared length beyond
        that is not waited for, and never longer than the body deadline; what is left then is cut off."""
        bound = DRAIN_FACTOR * self.max_body
        if declared is not None and declared > bound:
            return
        seen = 0
        with contextlib.suppress(TimeoutError, _ClientGone):
            async with asyncio.timeout(self.bounds.body_timeout):
                while seen <= bound:
                    message: Message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _ClientGone
                    seen += len(message.get("body", b""))
                    if not message.get("more_body", False):
                        return

    # -- control routes (testing only) ----------------------------------------------------------------------

    def _control(self, req: Request) -> Response:
        try:
            return self._control_route(req)
        except Reject as exc:
            # Control routes are for test code, which wants a plain HTTP error rather than the game's envelope.
            return error(exc.message, 400 if exc.status == 200 else exc.status)
        except (ValueError, TypeError) as exc:
            return error(f"bad control request: {exc}", 400)

    def _control_route(self, req: Request) -> Response:
        name = req.path[len(CONTROL_PREFIX) :].rstrip("/")
        if req.method == "POST" and name == "advance":
            seconds = req.json_object().get("seconds")
            advance = getattr(self.clock, "advance", None)
            if advance is None:
                raise Reject("this stand-in runs on the real clock", 400)
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int | float)
                or not 0 <= seconds <= MAX_ADVANCE_SECONDS  # also refuses NaN; a clock never goes back
            ):
                raise Reject(f"give 'seconds' as a number from 0 to {MAX_ADVANCE_SECONDS}", 400)
            advance(float(seconds))
            return ok(now=self.clock.now())
        if req.method == "GET" and name == "now":
            return ok(now=self.clock.now())
        if req.method == "POST" and name == "fault":
            data = req.json_object()
            delay = data.get("delay", 0.0)
            if isinstance(delay, bool) or not isinstance(delay, int | float):
                raise Reject("give 'delay' as a number of seconds", 400)
            self.faults.inject(
                str(data.get("endpoint", "")), str(data.get("kind", "")), data.get("count", 1), float(delay)
            )
            return ok()
        if req.method == "GET" and name == "count":
            return ok(count=self.count(req.query.get("endpoint", ""), req.query.get("username") or None))
        if req.method == "GET" and name == "branches":
            listing = self.store.branches(req.query.get("username", ""))
            return ok(
                list=[{"branch": b.name, "activeWorld": b.active_world, "activeSim": b.active_sim} for b in listing]
            )
        if req.method == "GET" and name == "code":
            found = self.store.branch(req.query.get("username", ""), req.query.get("branch", ""))
            return ok(modules=None if found is None else found.modules())
        if req.method == "POST" and name == "ticks":
            seconds = req.json_object().get("seconds")
            if isinstance(seconds, bool) or not isinstance(seconds, int | float):
                raise Reject("give 'seconds' between ticks as a number (0 pauses the game)", 400)
            self.sockets.set_tick_seconds(float(seconds))
            return ok(gameTime=self.sockets.game_time)
        if req.method == "POST" and name == "console":
            self.sockets.add_rule(parse_rule(req.json_object()))
            return ok()
        if req.method == "DELETE" and name == "console":
            self.sockets.clear_rules()
            return ok()
        if req.method == "GET" and name == "sockets":
            return ok(open=self.sockets.open_sockets(), gameTime=self.sockets.game_time)
        return error(f"no such control route: {req.method} {req.path}", 404)


def _scope_problem(req: Request, token: Token) -> Response | None:
    """403 when a restricted token may not use this endpoint (or this memory segment)."""
    if not token.allows(req.key):
        return error(f"token is not allowed to use {req.key}", 403, endpoint=req.key)
    if req.key in SEGMENT_ENDPOINTS and not token.full and req.key not in token.endpoints:
        raw = req.query.get("segment") if req.method == "GET" else req.json_object().get("segment")
        segment = parse_segment(raw)
        # A number that is not a segment at all is left to the handler ("invalid segment ID").
        if segment is not None and not token.allows_segment(req.key, segment):
            return error(f"token is not allowed to use memory segment {segment}", 403, segment=segment)
    return None


def _is_basic(authorization: str) -> bool:
    return authorization.strip().partition(" ")[0].lower() == "basic"


def _query(raw: bytes) -> tuple[dict[str, str], list[str]]:
    """The query's parameters (the first value of each) and the names given more than once or in the bracket form
    (``a[]=``, ``a[x]=``) that Express's query parser (qs) reads as a list or an object."""
    query: dict[str, str] = {}
    repeated: list[str] = []
    for name, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True, max_num_fields=200):
        base = name.partition("[")[0] if "[" in name[1:] and name.endswith("]") else name
        if (base in query or base != name) and base not in repeated:
            repeated.append(base)
        query.setdefault(base, value)
    return query, repeated


#: Headers of which Node keeps the first when a request repeats them; it joins the others with ", " (so two
#: ``X-Token`` headers are one unknown token there).
_FIRST_ONLY = frozenset(
    {
        "age", "authorization", "content-length", "content-type", "etag", "expires", "from", "host",
        "if-modified-since", "if-unmodified-since", "last-modified", "location", "max-forwards",
        "proxy-authorization", "referer", "retry-after", "server", "user-agent",
    }
)  # fmt: skip


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The request's headers by lower-case name, repeated ones combined as Node's ``req.headers`` combines them."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in raw:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        if name not in headers:
            headers[name] = value
        elif name == "cookie":
            headers[name] += "; " + value
        elif name not in _FIRST_ONLY:
            headers[name] += ", " + value
    return headers


_ROUTE_SLASHES = re.compile(r"/{2,}")
#: ``/api``, its sub-router's name, the route: the private server's Express app mounts a router at ``/api`` and one
#: per first name under it (``/api/user``, ``/api/game``, ...), and each mount takes one more slash after its path.
_API_ROUTE = re.compile(r"/api/{1,2}([^/]+)(?:/{1,2}([^/]+(?:/[^/]+)*))?/?", re.IGNORECASE)


def express_route(path: str) -> str | None:
    """The lower-case route the private server's Express app takes ``path`` for, or ``None`` where it names none (404
    there).

    Measured on the real server: ``/api//user//code`` and ``/api/user/code/`` are ``/api/user/code``;
    ``/api/user/code//``, ``/api///user/code``, ``//api/user/code`` and ``/api/user/%63ode`` are 404 (a mount takes
    one extra slash, a route one trailing slash; the path is matched as sent, escapes undecoded). Other paths (the
    page at ``/a``) keep case- and slash-forgiving matching.
    """
    if path.startswith("//"):
        return None
    if not path.lower().startswith("/api/"):
        return _ROUTE_SLASHES.sub("/", path).lower()
    match = _API_ROUTE.fullmatch(path)
    if match is None:
        return None
    first, rest = match.groups()
    return f"/api/{first}/{rest}".lower() if rest else f"/api/{first}".lower()


def _allowed_methods(path: str) -> Response:
    """Express's answer to ``OPTIONS``: 200 and the route's methods (HEAD with GET), no login needed; 404 when no
    route has the path."""
    methods: list[str] = []
    for key in ENDPOINTS:
        method = key.partition(" ")[0]
        if canonical_key(endpoint_key(method, path)) == key:
            methods += [method, "HEAD"] if method == "GET" else [method]
    if not methods:
        return error(f"no such endpoint: OPTIONS {path}", 404)
    allow = ",".join(methods).encode("ascii")
    return Response(200, allow, HTML_TYPE, [(b"allow", allow)])


def _who(user: list[str]) -> str:
    return user[0] if user else "-"


async def _respond(send: Send, response: Response, *, advertise: bool = False) -> None:
    headers = [
        (b"content-type", response.content_type),
        (b"content-length", str(len(response.body)).encode("ascii")),
        *response.headers,
    ]
    if advertise:
        # RFC 7694: the content codings this server reads in request bodies (the private server reads the same but
        # does not say so; the official server is not known to read them).
        headers.append((b"accept-encoding", b"deflate, gzip"))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


async def _drop(send: Send) -> None:
    """Close the connection without any answer.

    ASGI has no message for that, so reach uvicorn's transport (its ``send`` is a bound method of the request
    cycle) and abort it; elsewhere, start an answer that never completes, which makes the server close it.
    """
    cycle: Any = getattr(send, "__self__", None)
    transport: Any = getattr(cycle, "transport", None)
    if transport is not None and hasattr(cycle, "disconnected"):
        transport.abort()
        cycle.disconnected = True  # uvicorn then neither logs nor sends anything for this request
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"1")]})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def create_app(
    accounts: Accounts, data: Path, clock: Clock, *, testing: bool = False, bounds: ServiceBounds | None = None
) -> StandInApp:
    """The stand-in for ``accounts``, keeping its state in the SQLite file ``data`` (created when missing)."""
    return StandInApp(accounts, Store(data), clock, testing=testing, bounds=bounds)


__all__ = ["CONTROL_PREFIX", "MAX_BODY", "StandInApp", "create_app"]
