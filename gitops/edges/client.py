"""The one client of the game service: every request to a server goes through :class:`ServiceClient`.

It owns what every request needs, so that no other module has to think about it (and nothing else imports httpx
for the service):

* authentication: a persistent token in ``X-Token`` (never ``_token`` in a URL), or a private server's sign-in
  (screepsmod-auth) with its rotating ``X-Token``. There is no HTTP Basic fallback: the private server takes Basic
  only on ``POST /api/user/code``, so without the sign-in nothing could be planned;
* the response envelope: HTTP 200 without ``ok: 1`` is an error, shown with the server's own words;
* rate limits: requests are paced under the global 120 per minute, a 429 is waited out when the wait is short
  (``max_wait``) and refused with the reset time otherwise;
* what it learns: every request sent (counted before it is sent, so a budget errs on the safe side), the
  ``X-RateLimit-*`` headers, branch states, the branch list and the token's unlimited period go to an
  :class:`Observer` that the caller supplies (the ledger is one). The client never writes a file: saving what was
  learnt is the session's job, once per logical step;
* transient failures: a read is retried with exponential backoff (tenacity, imported at the first failure), a
  write at most once;
* bounds: each request, retries included, ends within ``timeout`` seconds, and each answer is read up to the cap of
  its endpoint (:mod:`gitops.edges.http` reads; :func:`gitops.core.endpoints.answer_cap` says how much);
* secrets: log lines carry method, sanitised URL, status and time, never headers or bodies; every message is
  redacted.

Errors are :mod:`gitops.errors` exceptions whose messages say what to do next; never a traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn, Protocol
from urllib.parse import urlsplit

import httpx

from gitops.config.credentials import Auth, PasswordAuth, TokenAuth
from gitops.config.manifest import ActiveName
from gitops.core.codeset import CodeSet, WireModule, request_body
from gitops.core.endpoints import (
    ACTIVATE,
    APPLY_ENDPOINTS,
    CLONE,
    DAY,
    DOWNLOAD,
    GLOBAL_KEY,
    GLOBAL_LIMIT,
    LIST,
    LIST_ENDPOINT,
    MINUTE,
    PLAN_ENDPOINTS,
    PROBE_BRANCH,
    QUERY_TOKEN,
    SIGNIN,
    Limit,
    answer_cap,
    endpoint_key,
    header_number,
    limit_for,
    pacing_wait,
    reset_time,
    window_key,
)
from gitops.core.remote import BranchInfo, RemoteBranch, branch_list, normal_stamp
from gitops.edges.bodies import COMPRESS_MIN_BYTES, Ahead, deflate_ahead_body, deflated
from gitops.edges.clock import Clock, SystemClock, Waiting
from gitops.edges.early import EarlyConnection
from gitops.edges.earlypool import use_early
from gitops.edges.headers import CLIENT_HEADERS, KEEPALIVE_SECONDS, REQUEST_SECONDS
from gitops.edges.http import AnswerTooLarge, Connections, UnreadableJSON, parse_json, send_bounded
from gitops.edges.threads import Background
from gitops.edges.tls import trust_context
from gitops.errors import AuthError, GitopsError, NetworkError, RateLimitedError, ScopeError, ServiceError
from gitops.secrets import Secret, redact

if TYPE_CHECKING:  # tenacity is imported when a first attempt fails (gitops.edges.retries)
    from tenacity import RetryCallState

__all__ = [
    "DeferredObserver",
    "Observer",
    "ReadOnlyClient",
    "ServerAnswerError",
    "ServiceClient",
    "TokenInfo",
]

#: How many times one request waits out a 429 before giving up.
MAX_RATE_LIMIT_RETRIES = 3
#: The longest wait a 429 can mean: the longest window is a day. A longer one is never waited, whatever --max-wait.
LONGEST_WAIT = float(DAY)
#: The longest a client waits for the TLS context its early connection makes first thing (the trust store, tens of
#: ms); past it, it makes its own, and its pool then shakes hands itself on a new connection.
EARLY_CONTEXT_SECONDS = 5.0
#: Attempts of a read (GET) and of a write (POST) when the network or the server fails.
READ_ATTEMPTS = 4
WRITE_ATTEMPTS = 2
#: Backoff between those attempts: 0.5 s, 1 s, 2 s, ... at most 8 s, and at most 30 s of waiting in all.
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 8.0
BACKOFF_TOTAL = 30.0

_RETRY_AFTER = re.compile(r"retry after\s+(\d+(?:\.\d+)?)\s*ms", re.IGNORECASE)
_HTML_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")
#: What a session token must look like to be sent back as a header: printable ASCII without spaces.
_HEADER_SAFE = re.compile(r"^[\x21-\x7e]+$")
#: How much of an answer that is not JSON is looked at to describe it (an HTML title, the first words).
_DESCRIBED_CHARS = 16 * 1024
_SIGNIN = SIGNIN.split(" ", 1)[1]
_CODE = DOWNLOAD.split(" ", 1)[1]


class ServerAnswerError(ServiceError):
    """The server answered a well-formed error (``{"error": ...}``); ``server_message`` holds its words."""

    def __init__(self, message: str, *, server_message: str, endpoint: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.server_message = server_message
        self.endpoint = endpoint


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """What ``GET /api/auth/query-token`` says of the token.

    ``unlimited_until`` is the UTC epoch second its unlimited period ends (``None``: limited now);
    ``unlimited_seconds`` is how long that is from now (0 when limited).
    """

    full: bool
    endpoints: tuple[str, ...]
    websockets: tuple[str, ...]
    memory_segments: tuple[int, ...]
    unlimited_until: float | None
    unlimited_seconds: float


class Observer(Protocol):
    """What the client tells about what it learns, and the two facts it asks back to pace its requests.

    :class:`gitops.edges.ledger.Ledger` implements it (in memory; the session saves it). Every method is called
    synchronously, in the order the client learns things; ``record_sent`` comes before the request is sent.
    """

    def record_sent(self, endpoint: str) -> None:
        """One request to ``endpoint`` is about to be sent, now."""
        ...

    def record_unsent(self, endpoint: str) -> None:
        """The request to ``endpoint`` just recorded never reached the server (no connection was made)."""
        ...

    def record_response(self, endpoint: str, status: int, headers: Mapping[str, str]) -> None:
        """An answer to ``endpoint`` arrived with these headers (``X-RateLimit-*`` among them, or not)."""
        ...

    def remember_branch(self, branch: RemoteBranch) -> None:
        """The state of a branch, learnt by a download or by the tool's own upload."""
        ...

    def forget_branch(self, name: str) -> None:
        """What the branch holds is no longer known."""
        ...

    def remember_branch_list(self, branches: list[BranchInfo]) -> None:
        """The account's branch list with its active flags, as listed now."""
        ...

    def remember_clone(self, name: str) -> None:
        """The branch ``name`` was created (its content is the server's copy, unknown here)."""
        ...

    def remember_activation(self, name: str, which: ActiveName) -> None:
        """The branch ``name`` was made active for the world or the simulation."""
        ...

    def set_unlimited_until(self, until: float | None) -> None:
        """The token query's answer: the end of the unlimited period, or ``None``."""
        ...

    def sent_times(self, endpoint: str, seconds: float) -> list[float]:
        """When the requests of the last ``seconds`` to ``endpoint`` (or to any, for ``GLOBAL_KEY``) were sent."""
        ...

    @property
    def unlimited_until(self) -> float | None:
        """The end of the token's unlimited period as known (``None``: limited)."""
        ...


class _Unobserved:
    """The observer of a client nobody listens to: it only remembers send times, to pace this run's requests."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._sent: list[float] = []

    def record_sent(self, endpoint: str) -> None:
        now = self._clock.now()
        self._sent = [t for t in self._sent if t > now - MINUTE]
        self._sent.append(now)

    def record_unsent(self, endpoint: str) -> None:
        if self._sent:
            self._sent.pop()

    def record_response(self, endpoint: str, status: int, headers: Mapping[str, str]) -> None:
        pass

    def remember_branch(self, branch: RemoteBranch) -> None:
        pass

    def forget_branch(self, name: str) -> None:
        pass

    def remember_branch_list(self, branches: list[BranchInfo]) -> None:
        pass

    def remember_clone(self, name: str) -> None:
        pass

    def remember_activation(self, name: str, which: ActiveName) -> None:
        pass

    def set_unlimited_until(self, until: float | None) -> None:
        pass

    def sent_times(self, endpoint: str, seconds: float) -> list[float]:
        since = self._clock.now() - seconds
        return [t for t in self._sent if t > since]

    @property
    def unlimited_until(self) -> float | None:
        return None


class DeferredObserver:
    """The observer of a side client (a request sent beside the main one, on a connection of its own:
    :mod:`gitops.app.headstart.sidereads`): it keeps what the request teaches and hands it to the real observer when
    :meth:`replay` is called, in the thread that owns that observer (the ledger is not thread-safe, and its owner
    saves it while the side request runs). The two facts a client asks back are read from the real observer: a
    side request's pacing so sees the main thread's requests, and the main thread sees the side request's once it is
    replayed (at most the few side requests of a run are paced a moment late)."""

    def __init__(self, real: Observer) -> None:
        self._real = real
        self._calls: list[tuple[str, tuple[Any, ...]]] = []
        self._lock = threading.Lock()

    def _keep(self, name: str, *args: Any) -> None:
        with self._lock:
            self._calls.append((name, args))

    def replay(self) -> None:
        """Tell the real observer everything kept so far, in order."""
        with self._lock:
            calls, self._calls = self._calls, []
        for name, args in calls:
            method = getattr(self._real, name, None)  # remember_scope: only the ledger has it
            if method is not None:
                method(*args)

    def record_sent(self, endpoint: str) -> None:
        self._keep("record_sent", endpoint)

    def record_unsent(self, endpoint: str) -> None:
        self._keep("record_unsent", endpoint)

    def record_response(self, endpoint: str, status: int, headers: Mapping[str, str]) -> None:
        self._keep("record_response", endpoint, status, dict(headers))

    def remember_branch(self, branch: RemoteBranch) -> None:
        self._keep("remember_branch", branch)

    def forget_branch(self, name: str) -> None:
        self._keep("forget_branch", name)

    def remember_branch_list(self, branches: list[BranchInfo]) -> None:
        self._keep("remember_branch_list", list(branches))

    def remember_clone(self, name: str) -> None:
        self._keep("remember_clone", name)

    def remember_activation(self, name: str, which: ActiveName) -> None:
        self._keep("remember_activation", name, which)

    def set_unlimited_until(self, until: float | None) -> None:
        self._keep("set_unlimited_until", until)

    def remember_scope(self, full: bool, endpoints: tuple[str, ...]) -> None:
        self._keep("remember_scope", full, endpoints)

    def sent_times(self, endpoint: str, seconds: float) -> list[float]:
        return self._real.sent_times(endpoint, seconds)

    @property
    def unlimited_until(self) -> float | None:
        return self._real.unlimited_until


class _Transient(Exception):
    """A failure worth another attempt; ``error`` is what the user sees when attempts run out. ``sent``: the request
    may have reached the server (False only when no connection was made)."""

    def __init__(self, error: GitopsError, *, sent: bool = True) -> None:
        super().__init__(error.message)
        self.error = error
        self.sent = sent


def _lost(error: GitopsError) -> GitopsError:
    """``error`` of a write that may have reached the server and is not sent again (see ``upload_code``)."""
    error.hint = (
        "The server may or may not have taken it; it was not sent again, so that the upload reserved for a rollback "
        "stays unspent. Run 'gitops plan': it downloads the branch and shows whether the upload is still needed."
    )
    return error


class _RedactingFilter(logging.Filter):
    """httpx logs every request URL at INFO; the token query's URL carries the token, so scrub every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        return True


_httpx_logger = logging.getLogger("httpx")
if not any(isinstance(f, _RedactingFilter) for f in _httpx_logger.filters):
    _httpx_logger.addFilter(_RedactingFilter())


def sanitize_url(url: str) -> str:
    """A URL fit for a log line: no user info, token query values hidden, known secrets redacted."""
    return redact(_USERINFO.sub("", url))


class ServiceClient:
    """Every request to one server account; implements :class:`gitops.core.remote.RemoteWriter`.

    ``url`` is the server's base address, with any path prefix (``https://screeps.com/ptr``). ``auth`` ``None``
    sends no credentials (only useful against endpoints that need none). ``observer`` (a
    :class:`gitops.edges.ledger.Ledger`, say) is told of every request sent, the rate-limit headers and what is
    learnt of branches and of the token; the client never saves it. ``on_wait(seconds,
    endpoint)`` is called before a rate-limit wait (``endpoint`` is ``"global"`` when pacing under the global
    limit); ``log`` receives one redacted line per request in debug mode. ``transport`` is the test seam.
    ``timeout`` (seconds) bounds each request as a whole, retries included; tests lower it. ``early``: a TCP
    connection to the server already being opened (:mod:`gitops.edges.early`), which the first connection takes.
    """

    def __init__(
        self,
        *,
        server_name: str,
        url: str,
        auth: Auth | None,
        observer: Observer | None = None,
        clock: Clock | None = None,
        transport: httpx.BaseTransport | None = None,
        max_wait: float = 60.0,
        on_wait: Callable[[float, str], None] | None = None,
        log: Callable[[str], None] | None = None,
        timeout: float = REQUEST_SECONDS,
        waiting: Waiting | None = None,
        early: EarlyConnection | None = None,
    ) -> None:
        self.server_name = server_name
        self.base_url = url.strip().rstrip("/")
        if not re.match(r"^https?://[^/\s]+", self.base_url):
            raise ServiceError(
                f"server '{server_name}' has url '{sanitize_url(self.base_url)}', which is not an http(s) address.",
                hint="Set servers."
                + server_name
                + ".url in the manifest to the server's base address, e.g. https://screeps.com or "
                "http://127.0.0.1:21025.",
            )
        self._auth = auth
        self._clock: Clock = clock or SystemClock()
        self._observer: Observer = observer if observer is not None else _Unobserved(self._clock)
        self._max_wait = max_wait
        self._on_wait = on_wait
        self._log = log
        self._waiting = waiting or (lambda _what: contextlib.nullcontext(_ignore))
        self._timeout = timeout
        self._deadline = 0.0  # of the request being sent (time.monotonic()); set by _send
        self._session: Secret | None = None  # the rotating token of a private server's sign-in
        #: Send uploads (and clones that carry modules) compressed; the session sets it from the manifest's
        #: ``compress`` and what the server is known to take (``gitops.app.session.Session.writer``).
        self.compress = False
        self._ahead = Ahead()
        #: The bodies prepare_write encoded, by branch and kind (clone or not), each for the write of those very
        #: modules (by identity) that follows it.
        self._prepared: dict[tuple[str, bool], tuple[Mapping[str, WireModule], bytes]] = {}
        # Redirects are not followed: httpx would carry X-Token to wherever the redirect points.
        #: The kept-alive connection's socket, for the deadline's watchdog (None: a test's transport, no sockets).
        self._connections: Connections | None = None
        self._early: EarlyConnection | None = None
        if transport is None:
            self._connections = Connections()
            # An idle connection is dropped after 3 s, before servers drop theirs (Node's default is 5 s), so that a
            # request never races the server closing the connection it reuses.
            limits = httpx.Limits(keepalive_expiry=KEEPALIVE_SECONDS)
            if self.base_url.lower().startswith("http://"):
                # A plain-HTTP server (a private server, the stand-in) needs no TLS: httpx's default transport
                # would load the whole CA bundle into an SSL context (~30-200 ms) for nothing. This context has no
                # trust store, so the client could not speak TLS to anyone even if a request went to https://.
                transport = httpx.HTTPTransport(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), limits=limits)
            else:
                # httpx's own default, made where the game socket makes its own too (one rule for both); the very
                # context the early connection's TLS handshake used, when it made one (gitops.edges.early).
                made = early.ssl_context(EARLY_CONTEXT_SECONDS) if early is not None else None
                transport = httpx.HTTPTransport(verify=made or trust_context(), limits=limits)
            if early is not None:
                use_early(transport, early, self._connections.remember)
                self._early = early  # closed with the client unless its first connection took it
        self._http = httpx.Client(
            transport=transport,
            timeout=timeout,
            follow_redirects=False,
            headers=CLIENT_HEADERS,
        )

    # --- lifecycle -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool (after any body still being deflated ahead of time), and the connection opened
        early for it if no request ever took it (a read sent ahead that never went out)."""
        self._ahead.join()
        self._http.close()
        if self._early is not None:
            self._early.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the service's operations ----------------------------------------------------------------------------

    def list_branches(self) -> list[BranchInfo]:
        """All branches of the account with their active flags (``GET /api/user/branches``)."""
        data = self._call("GET", LIST.split(" ", 1)[1])
        branches = branch_list(data)
        if branches is None:
            raise self._shape_error(LIST, "'list' is not a list of branches")
        self._observer.remember_branch_list(branches)
        return branches

    def get_code(self, branch: str) -> CodeSet | None:
        """The modules of ``branch``, or ``None`` when the server says the branch does not exist."""
        endpoint = DOWNLOAD
        now = self._clock.now()
        try:
            data = self._call("GET", _CODE, params={"branch": branch})
        except ServerAnswerError as exc:
            if exc.server_message.strip().lower() != "no code":
                raise
            if not branch.startswith("$"):
                self._observer.remember_branch(RemoteBranch.missing(branch, now))
            return None
        try:
            code = CodeSet.from_wire(data.get("modules"))
        except ValueError as exc:
            raise self._shape_error(endpoint, str(exc)) from None
        # '$activeWorld' names whichever branch is active; the answer says which one that is.
        name = data.get("branch") if branch.startswith("$") else branch
        if isinstance(name, str) and not name.startswith("$"):
            self._observer.remember_branch(RemoteBranch.from_code(name, code, now, "download"))
        return code

    def upload_code(self, branch: str, modules: Mapping[str, WireModule], *, resend_if_lost: bool = True) -> None:
        """Replace every module of ``branch`` (``POST /api/user/code``); the branch must exist.

        When the outcome is unknown (the connection dropped, a timeout, a 5xx, an answer that cannot be read, or
        any other failure) the server may have committed the upload: what the tool knew of the branch is dropped,
        so the next plan learns it from the server instead of from a record the upload may have made false.

        ``resend_if_lost=False``: an upload that may have reached the server is not sent again (only one that never
        found a connection is). The server counts every upload it receives, committed or not, so a resend after a
        lost answer spends a second upload of the day's 240: apply asks for this when the plan reserved an upload
        for a rollback on the server, which a resend would otherwise spend (see
        :func:`gitops.core.apply.apply_plan`).
        """
        # The record of what the branch will hold is made while the upload is on its way.
        written: Background[RemoteBranch | None] = Background(lambda: _branch_written(branch, modules))
        body = self._take_prepared(branch, modules, clone=False) or _upload_body(branch, modules)
        try:
            with _in_flight(f"the upload to {self.server_name}/{branch}"):
                data = self._call("POST", _CODE, body=body, compress=self.compress, resend=resend_if_lost)
        except BaseException:
            written.join()
            self._observer.forget_branch(branch)
            raise
        self._remember_written(branch, written, data)

    def prepare_write(
        self, branch: str, modules: Mapping[str, WireModule], *, clone: bool = False, content: bytes | None = None
    ) -> None:
        """Start deflating, in a background thread, the body that :meth:`upload_code` (or with ``clone``,
        :meth:`clone_branch` creating the branch with these modules) will send, so that the work runs while the run
        waits for something else (the compression probe's answer); nothing is sent. Pointless, and so skipped, for a
        body below :data:`COMPRESS_MIN_BYTES` (sent as it is).

        The body's JSON is kept for the next write of ``branch``: when that write is given the very same
        ``modules`` object (unchanged: the caller's, read-only), it sends these bytes instead of encoding the ~5 MB
        again. ``content`` is that JSON when the caller has it already (the upload body the local read made, for
        code of the same digest: :func:`gitops.core.codeset.upload_body`, byte for byte)."""
        if content is None:
            content = _json_body(_clone_body(branch, None, modules) if clone else _upload_body(branch, modules))
        self._prepared[(branch, clone)] = (modules, content)
        deflate_ahead_body(self._ahead, content)

    def _take_prepared(self, branch: str, modules: Mapping[str, WireModule], *, clone: bool) -> _Encoded | None:
        """The body :meth:`prepare_write` encoded for this write (the same branch, kind and ``modules`` object);
        ``None`` otherwise. Taken once."""
        prepared = self._prepared.pop((branch, clone), None)
        if prepared is None or prepared[0] is not modules:
            return None
        return _Encoded(prepared[1])

    def clone_branch(
        self, new_name: str, source: str | None = None, modules: Mapping[str, WireModule] | None = None
    ) -> None:
        """Create ``new_name`` (``POST /api/user/clone-branch``) from ``source``, or holding ``modules``
        (``defaultModules``, as rollup-plugin-screeps creates branches: no upload is needed after it), or with the
        server's default modules when neither is given."""
        body = _clone_body(new_name, source, modules)
        prepared = (
            self._take_prepared(new_name, modules, clone=True) if modules is not None and source is None else None
        )
        written: Background[RemoteBranch | None] = Background(
            lambda: None if modules is None else _branch_written(new_name, modules)
        )
        try:
            with _in_flight(f"the creation of {self.server_name}/{new_name}"):
                data = self._call("POST", CLONE.split(" ", 1)[1], body=prepared or body, compress=self.compress)
        except BaseException:
            written.join()
            self._observer.forget_branch(new_name)
            raise
        self._observer.remember_clone(new_name)
        if "defaultModules" in body and modules is not None:
            self._remember_written(new_name, written, data)
        else:
            written.join()

    def _remember_written(self, branch: str, written: Background[RemoteBranch | None], data: Mapping[str, Any]) -> None:
        """What the branch holds after this tool wrote ``written``'s modules to it, stamped now and with the
        server's new stamp."""
        try:
            made = written.result()
        except ValueError:
            made = None
        if made is None:
            self._observer.forget_branch(branch)
        else:
            stamp = normal_stamp(data.get("timestamp"))
            self._observer.remember_branch(dataclasses.replace(made, learnt_at=self._clock.now(), stamp=stamp))

    def set_active_branch(self, branch: str, which: ActiveName) -> None:
        """Make ``branch`` the active branch for the world or the simulation (``POST
        /api/user/set-active-branch``)."""
        active_name = "activeWorld" if which == "world" else "activeSim"
        with _in_flight(f"the activation of {self.server_name}/{branch}"):
            self._call("POST", ACTIVATE.split(" ", 1)[1], body={"branch": branch, "activeName": active_name})
        self._observer.remember_activation(branch, which)

    def probe_compression(self) -> bool | None:
        """Whether the server reads a compressed request body, learnt without changing anything: a deflated
        ``set-active-branch`` of :data:`PROBE_BRANCH`, a branch that does not exist. A server that inflated the body
        answers ``no branch``; one that could not read it answers 400 or 415, or misses the fields (``invalid
        params``): either way nothing is activated or written. ``None`` when the answer tells nothing (the token
        may not use the endpoint, the server failed): no compression then, and the next run asks again. It costs one
        ``POST /api/user/set-active-branch`` (240 a day, apart from the uploads), which the plan counts."""
        body = {"branch": PROBE_BRANCH, "activeName": "activeWorld"}
        try:
            self._call("POST", ACTIVATE.split(" ", 1)[1], body=body, compress=True, force=True)
        except ServerAnswerError as exc:
            return exc.server_message.strip().lower() == "no branch"
        except (AuthError, RateLimitedError, NetworkError):
            return None
        except ServiceError:
            return False  # 400, 415 or another answer to a body it did not read
        # Activated a branch of that name: the server read the body (and the branch existed after all).
        return True

    def query_token(self) -> TokenInfo:
        """The token's scope and unlimited period (``GET /api/auth/query-token``); official servers only.

        The token goes in the URL's query (``?token=``): the interface document gives the endpoint no other form
        (section 4.2; ``X-Token`` authenticates a request, it does not name the token to describe). So the URL is
        never shown whole: every debug line goes through :func:`sanitize_url`, httpx's log through the redacting
        filter, and errors are worded without the request (``tests/test_query_token_canary.py``)."""
        token = self._token_auth("The token query").token
        data = self._call("GET", QUERY_TOKEN.split(" ", 1)[1], params={"token": token.reveal()})
        info = _token_info(data, self._clock.now())
        self._observer.set_unlimited_until(info.unlimited_until)
        remember = getattr(self._observer, "remember_scope", None)
        if remember is not None:
            remember(info.full, info.endpoints)
        return info

    def socket_login(self) -> tuple[str, Secret]:
        """The account's user id (``GET /api/auth/me``, counted against the global limit only) and the token that
        the game socket's ``auth`` takes: the persistent token, or on a private server the sign-in's token."""
        data = self._call("GET", "/api/auth/me")
        user_id = data.get("_id")
        if not isinstance(user_id, str) or not re.match(r"^[A-Za-z0-9_-]{1,64}$", user_id):
            raise self._shape_error("GET /api/auth/me", "'_id' is missing or not an id")
        if isinstance(self._auth, TokenAuth):
            return user_id, self._auth.token
        if self._session is None:
            raise AuthError(
                f"server '{self.server_name}' is used without credentials, so its game socket cannot be read.",
                hint="Set token_env (or a user name and password) for the server in the manifest.",
            )
        return user_id, self._session

    def no_rate_limit_url(self) -> Secret:
        """The no-rate-limit page for the token; a :class:`Secret` because the link carries the token."""
        token = self._token_auth("The no-rate-limit page").token
        # Not registered itself: the token inside is, so redact() shows the link with 'token=<hidden>'.
        return Secret(f"{self.base_url}/a/#!/account/auth-tokens/noratelimit?token={token.reveal()}", scrub=False)

    # --- one request, start to finish ------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        compress: bool = False,
        force: bool = False,
        resend: bool = True,
    ) -> dict[str, Any]:
        """Send one request and return the answer's JSON object, or raise the error a user should see.

        ``compress`` deflates a body of at least :data:`COMPRESS_MIN_BYTES` (``force``: any body). ``resend=False``:
        a failed attempt that may have reached the server is not retried (see :meth:`upload_code`)."""
        endpoint = endpoint_key(method, path)
        waits = 0
        signed_in_again = False
        encoding = ("force" if force else "deflate") if compress else None
        while True:
            response, data = self._send(method, path, endpoint, params, body, encoding, resend=resend)
            status = response.status_code
            if status == 429:
                wait = self._retry_after(response)
                if wait <= min(self._max_wait, LONGEST_WAIT) and waits < MAX_RATE_LIMIT_RETRIES:
                    waits += 1
                    self._wait(wait, endpoint)
                    continue
                self._rate_limited(endpoint, response, wait, waits)
            if status == 401:
                if isinstance(self._auth, PasswordAuth) and not signed_in_again:
                    # Private-server tokens live 60 s: sign in afresh once, then retry once.
                    signed_in_again = True
                    self._session = None
                    continue
                raise self._refused(endpoint)
            if status == 403:
                raise self._forbidden(endpoint, data)
            if not 200 <= status < 300:
                error = self._unexpected_status(endpoint, response, data)
                if status in (400, 415) and response.request.headers.get("Content-Encoding"):
                    error.hint = (
                        "The server did not read the compressed request body, so nothing was changed. Set "
                        f"servers.{self.server_name}.compress to 'never' (or 'auto', which asks the server first) in "
                        "the manifest."
                    )
                raise error
            if not isinstance(data, dict):
                raise self._shape_error(endpoint, "the answer is JSON but not an object")
            if data.get("ok") != 1:
                raise self._answer_error(endpoint, data)
            return data

    def _send(
        self,
        method: str,
        path: str,
        endpoint: str,
        params: Mapping[str, str] | None,
        body: Any,
        encoding: str | None = None,
        *,
        resend: bool = True,
    ) -> tuple[httpx.Response, Any]:
        """One request with bounded retries of transient failures (tenacity; the clock does the sleeping).

        ``timeout`` is the deadline of the whole request, retries included: each attempt gets what is left of it, and
        no retry starts that its backoff would push past it. Every answer is read with the cap of its endpoint
        (:func:`gitops.core.endpoints.answer_cap`); over it, the request ends at once (a hostile server would only
        send the same again)."""
        outer = self._deadline  # a sign-in is sent from inside another request's attempt: keep that one's
        self._deadline = time.monotonic() + self._timeout
        try:
            failed: list[BaseException] = []  # handed over, not kept here: its answer may be large

            def attempt() -> tuple[httpx.Response, Any]:
                try:
                    return self._attempt(method, path, endpoint, params, body, encoding)
                except _Transient as exc:
                    if exc.sent and not resend:
                        raise _lost(exc.error) from None  # not a _Transient: no retry
                    raise

            try:
                return attempt()
            except _Transient as exc:
                failed.append(exc)
            # The rest of the attempts go through tenacity, imported only now (gitops.edges.retries).
            from gitops.edges.retries import after_first

            return after_first(
                failed,
                attempt,
                retry_on=_Transient,
                attempts=READ_ATTEMPTS if method == "GET" else WRITE_ATTEMPTS,
                backoff=(BACKOFF_FIRST, BACKOFF_MAX, BACKOFF_TOTAL),
                deadline=lambda: self._deadline,
                sleep=self._retry_sleep,
                before_sleep=self._log_retry,
            )
        except _Transient as exc:
            raise exc.error from None
        finally:
            self._deadline = outer

    def _attempt(
        self,
        method: str,
        path: str,
        endpoint: str,
        params: Mapping[str, str] | None,
        body: Any,
        encoding: str | None = None,
    ) -> tuple[httpx.Response, Any]:
        headers = self._auth_headers(path)
        content = None
        if body is not None:
            content = body.content if isinstance(body, _Encoded) else _json_body(body)
            headers["Content-Type"] = "application/json; charset=utf-8"
            if encoding == "force" or (encoding == "deflate" and len(content) >= COMPRESS_MIN_BYTES):
                # The server applies its limits (5 MB of code, 8 MiB of body) to the inflated body, as before.
                content = deflated(content)
                headers["Content-Encoding"] = "deflate"
        paced = time.monotonic()
        self._pace()
        # Pacing under the global limit waits for the server's window, not for its answer: the wait (up to a minute)
        # does not count against the request's deadline, which is for the server to answer in.
        self._deadline += time.monotonic() - paced
        self._record_sent(endpoint)
        url = self.base_url + path
        started = time.perf_counter()
        big = content is not None and len(content) >= _PROGRESS_BYTES
        sending = f", sending {_size_text(len(content))}" if content is not None and big else ""
        try:
            label = f"server '{self.server_name}' to answer {endpoint}{sending}"
            with self._waiting(label) as update:
                payload: bytes | Iterator[bytes] | None = content
                if content is not None and big:
                    # Sent in pieces, so that the wait can say how much is sent; the length is known, so the body
                    # still goes with a Content-Length (not chunked), exactly as the bytes would.
                    headers["Content-Length"] = str(len(content))
                    payload = _pieces(content, lambda sent: update(f"{label} ({100 * sent // len(content)}% sent)"))
                request = self._http.build_request(method, url, params=params, content=payload, headers=headers)
                response = send_bounded(
                    self._http,
                    request,
                    cap=answer_cap(endpoint),
                    deadline=self._deadline,
                    connections=self._connections,
                )
        except AnswerTooLarge as exc:
            self._debug(f"{method} {sanitize_url(str(httpx.URL(url, params=params)))} -> over {exc.cap} bytes")
            raise self._too_large(endpoint, exc.cap) from None
        except httpx.DecodingError as exc:
            self._debug(f"{method} {sanitize_url(str(httpx.URL(url, params=params)))} -> {exc}")
            raise _Transient(self._shape_error(endpoint, str(exc))) from None
        except (httpx.LocalProtocolError, UnicodeEncodeError) as exc:
            # Not worth another attempt: the request itself cannot be written. The exception's text quotes the
            # offending header value, which is the token or the user name, so only its type is shown.
            self._debug(f"{method} {sanitize_url(str(httpx.URL(url, params=params)))} -> {type(exc).__name__}")
            raise self._unsendable(endpoint, exc) from None
        except httpx.TransportError as exc:
            if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
                # No connection, so no request: the server counted nothing, and neither does the ledger (a day of
                # refused connections must not spend the day's uploads on the tool's own count).
                self._observer.record_unsent(endpoint)
            elapsed = (time.perf_counter() - started) * 1000
            shown = sanitize_url(str(httpx.URL(url, params=params)))
            self._debug(f"{method} {shown} -> {type(exc).__name__} ({elapsed:.0f} ms)")
            error = self._network_error(endpoint, exc)
            if tls_reason(exc) in _TLS_HINTS:
                raise error from None  # a certificate or a scheme that is wrong now is as wrong a second later
            raise _Transient(error, sent=not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)) from None
        elapsed = (time.perf_counter() - started) * 1000
        self._debug(f"{method} {sanitize_url(str(response.request.url))} -> {response.status_code} ({elapsed:.0f} ms)")
        self._after_response(endpoint, response)
        status = response.status_code
        if status >= 500:
            raise _Transient(
                NetworkError(
                    f"server '{self.server_name}' answered {status} {response.reason_phrase} to {endpoint}"
                    f"{_said(response)}.",
                    hint="The server may be down or overloaded; try again later (the request was retried).",
                )
            )
        data = _json_or_none(response)
        if 200 <= status < 300 and data is None:
            raise _Transient(
                ServiceError(
                    f"server '{self.server_name}' answered {endpoint} with {_describe_body(response)} instead of JSON"
                    f"{_json_trouble(response)}.",
                    hint=f"Check that the url '{sanitize_url(self.base_url)}' in the manifest is the game server's "
                    "base address (e.g. https://screeps.com or http://127.0.0.1:21025) and that the server is up.",
                )
            )
        return response, data

    def _after_response(self, endpoint: str, response: httpx.Response) -> None:
        if isinstance(self._auth, PasswordAuth):
            fresh = response.headers.get("X-Token")
            if fresh and _HEADER_SAFE.match(fresh):
                # screepsmod-auth hands out a new token with every answer; the old one soon stops working.
                self._session = Secret(fresh)
        headers: Mapping[str, str] = response.headers
        if response.status_code == 429 and "x-ratelimit-limit" not in response.headers:
            headers = self._guessed_429_headers(endpoint, response)
        self._observer.record_response(endpoint, response.status_code, headers)

    # --- authentication --------------------------------------------------------------------------------------

    def _auth_headers(self, path: str) -> dict[str, str]:
        auth = self._auth
        if auth is None or path == _SIGNIN:
            return {}
        if isinstance(auth, TokenAuth):
            return {"X-Token": auth.token.reveal()}
        if self._session is None:
            self._sign_in(auth)
        assert self._session is not None
        # screepsmod-auth wants X-Username too; any non-empty value is accepted.
        return {"X-Token": self._session.reveal(), "X-Username": auth.username}

    def _sign_in(self, auth: PasswordAuth) -> None:
        endpoint = endpoint_key("POST", _SIGNIN)
        body = {"email": auth.username, "password": auth.password.reveal()}
        response, data = self._send("POST", _SIGNIN, endpoint, None, body)
        status = response.status_code
        if status == 404:
            raise AuthError(
                f"server '{self.server_name}' has no {_SIGNIN} (404), so the user name and password from "
                f"{auth.source} cannot be used: a password login needs screepsmod-auth's sign-in.",
                hint="Install screepsmod-auth on the private server (see gitops help private-server); on an official "
                "server use a persistent token (token_env) instead.",
            )
        if status == 401 or (status == 200 and isinstance(data, dict) and data.get("ok") != 1):
            words = _error_words(data) if isinstance(data, dict) else ""
            raise AuthError(
                f"server '{self.server_name}' refused the sign-in with the user name and password from "
                f"{auth.source}{': ' + words if words else ''}.",
                hint="Check the user name (or e-mail) and password; on a private server set the password with "
                "screepsmod-auth (in the server CLI: setPassword('NAME', 'PASSWORD')).",
            )
        token = data.get("token") if isinstance(data, dict) else None
        if status != 200:
            raise self._unexpected_status(endpoint, response, data)
        if not isinstance(token, str) or not _HEADER_SAFE.match(token):
            # Never the body: it is the session token the tool could not use.
            raise self._shape_error(endpoint, "'token' is missing or not printable ASCII")
        self._session = Secret(token)

    def _token_auth(self, what: str) -> TokenAuth:
        if isinstance(self._auth, TokenAuth):
            return self._auth
        raise AuthError(
            f"{what} is only for persistent tokens, and server '{self.server_name}' is not used with one.",
            hint="Tokens and rate limits exist on the official servers (token_env in the manifest); private servers "
            "have neither.",
        )

    # --- rate limits -----------------------------------------------------------------------------------------

    def _pace(self) -> None:
        """Wait, if needed, so that the next request stays under the global limit (120 per minute)."""
        if not isinstance(self._auth, TokenAuth) or self._unlimited():
            return
        times = self._observer.sent_times(GLOBAL_KEY, MINUTE)
        wait = pacing_wait(times, self._clock.now())
        if wait > 0:
            self._debug(f"pacing: {len(times)} requests in the last minute; waiting {wait:.1f} s")
            self._wait(wait, GLOBAL_KEY)

    def _unlimited(self) -> bool:
        until = self._observer.unlimited_until
        return until is not None and until > self._clock.now()

    def _retry_sleep(self, seconds: float) -> None:
        with self._waiting(f"a retry of a request to server '{self.server_name}' (in {seconds:.1f} s)"):
            self._clock.sleep(seconds)

    def _wait(self, seconds: float, endpoint: str) -> None:
        if self._on_wait is not None:
            self._on_wait(seconds, endpoint)
        self._clock.sleep(seconds)

    def _record_sent(self, endpoint: str) -> None:
        self._observer.record_sent(endpoint)

    def _retry_after(self, response: httpx.Response) -> float:
        """Seconds a 429 asks to wait: the body's ``retry after <ms>ms``, else the reset header, else
        ``Retry-After``, else a minute. Never negative or NaN; ``inf`` when the body's number is too large for a
        float (the caller treats anything over :data:`LONGEST_WAIT` as "more than a day")."""
        match = _RETRY_AFTER.search(response.text)
        if match:
            return float(match.group(1)) / 1000.0  # digits only: finite, or inf when there are hundreds of them
        now = self._clock.now()
        reset = header_number(response.headers.get("X-RateLimit-Reset"))
        if reset is not None:
            return max(0.0, reset_time(reset, now) - now)
        after = header_number(response.headers.get("Retry-After"))
        if after is not None:
            return max(0.0, after)
        return float(MINUTE)

    def _guessed_429_headers(self, endpoint: str, response: httpx.Response) -> dict[str, str]:
        # A 429 without X-RateLimit-* headers: record its window as spent until the wait is over (at most a day).
        wait = min(self._retry_after(response), LONGEST_WAIT)
        return {
            "X-RateLimit-Limit": str(_limit_of_429(endpoint, response, wait).count),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(int(self._clock.now() + wait + 0.999)),
        }

    def _rate_limited(self, endpoint: str, response: httpx.Response, wait: float, waits: int) -> NoReturn:
        limit = _limit_of_429(endpoint, response, wait)
        which = (
            f"the global limit of {limit.describe()}"
            if limit is GLOBAL_LIMIT
            else f"the limit of {limit.describe()} for {endpoint}"
        )
        shown = min(wait, LONGEST_WAIT)
        reset_at = datetime.fromtimestamp(self._clock.now() + shown, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if waits >= MAX_RATE_LIMIT_RETRIES:
            why = f"still refused after waiting {waits} times"
        elif wait > LONGEST_WAIT:
            # No window is longer than a day: a longer wait is the server's nonsense, and no reason to sleep on.
            reset_at += " or later"
            why = (
                f"the server asked for a wait of more than a day, longer than --max-wait ({_duration(self._max_wait)})"
            )
        else:
            why = f"a wait of {_duration(wait)} is longer than --max-wait ({_duration(self._max_wait)})"
        raise RateLimitedError(
            f"server '{self.server_name}' refused {endpoint}: rate limited by {which}; it resets at {reset_at} "
            f"({why}).",
            hint="Wait until then and run again, or lift every limit of the token for two hours on the "
            "no-rate-limit page: `gitops unlock` prints its link.",
        )

    # --- errors ----------------------------------------------------------------------------------------------

    def _refused(self, endpoint: str) -> AuthError:
        auth = self._auth
        if auth is None:
            return AuthError(
                f"server '{self.server_name}' needs credentials for {endpoint}, and none were given.",
                hint=f"Name them in servers.{self.server_name} of the manifest (token_env, or username_env and "
                "password_env).",
            )
        what = "token" if isinstance(auth, TokenAuth) else "user name and password"
        return AuthError(
            f"the server refused the credentials for server '{self.server_name}' (401 on {endpoint}); check the "
            f"{what} in {auth.source}.",
            hint="A token is created in the account settings of the server (Account, Auth tokens); a mistyped or "
            "deleted token gets this answer."
            if isinstance(auth, TokenAuth)
            else "On a private server the password is set with screepsmod-auth (in the server CLI: setPassword).",
        )

    def _forbidden(self, endpoint: str, data: Any) -> AuthError:
        """403: for a token, a :class:`ScopeError` naming the endpoint and the scope plan and apply need."""
        if not isinstance(self._auth, TokenAuth):
            words = _error_words(data) if isinstance(data, dict) else ""
            return AuthError(
                f"server '{self.server_name}' forbade {endpoint} (403){': ' + words if words else ''}.",
                hint="Check that the account may use this endpoint on that server.",
            )
        return ScopeError(
            f"the token for server '{self.server_name}' may not use {endpoint}; plan needs "
            f"{', '.join(PLAN_ENDPOINTS)} (and {LIST_ENDPOINT} to see which branches are active); apply also needs "
            f"{', '.join(APPLY_ENDPOINTS)} — create a token with those endpoints or a full-access token.",
            hint=f"Tokens are created in the account settings; put the new one in {self._auth.source}.",
        )

    def _unexpected_status(self, endpoint: str, response: httpx.Response, data: Any) -> ServiceError:
        status = response.status_code
        if 300 <= status < 400:
            location = sanitize_url(response.headers.get("Location", "elsewhere"))
            return ServiceError(
                f"server '{self.server_name}' redirected {endpoint} to {location}.",
                hint="Put the address it redirects to in the manifest's url (redirects are not followed, so that "
                "credentials only go where the manifest says).",
            )
        words = _error_words(data) if isinstance(data, dict) else ""
        said = f": {words}" if words else _said(response)
        hint = None
        if status == 404:
            hint = (
                f"Check that the url '{sanitize_url(self.base_url)}' in the manifest is the game server's base "
                "address, with any path prefix (https://screeps.com/ptr)."
            )
        elif status == 413:
            hint = "The request is too large for the server; the code of a branch must stay under 5 MB."
        return ServiceError(
            f"server '{self.server_name}' answered {status} {response.reason_phrase} to {endpoint}{said}.", hint=hint
        )

    def _answer_error(self, endpoint: str, data: Mapping[str, Any]) -> ServerAnswerError:
        words = _error_words(data)
        if not words:
            return ServerAnswerError(
                f"server '{self.server_name}' answered {endpoint} without 'ok: 1' and without an error message.",
                server_message="",
                endpoint=endpoint,
                hint="The server does not behave as the interface describes; check the url in the manifest.",
            )
        return ServerAnswerError(
            f"server '{self.server_name}' refused {endpoint}: {words}", server_message=words, endpoint=endpoint
        )

    def _shape_error(self, endpoint: str, reason: str) -> ServiceError:
        return ServiceError(
            f"server '{self.server_name}' answered {endpoint} with JSON the tool cannot read: {redact(reason)}.",
            hint="Check that the url in the manifest is a Screeps server's base address.",
        )

    def _too_large(self, endpoint: str, cap: int) -> ServiceError:
        if endpoint == LIST_ENDPOINT:
            hint = (
                "On a private server this answer carries the code of every branch: delete the branches no longer "
                "needed (POST /api/user/delete-branch), or check that the url in the manifest is a Screeps server."
            )
        else:
            hint = "No answer of a Screeps server is that large; check that the url in the manifest is one."
        return ServiceError(
            f"server '{self.server_name}' sent more than {cap // (1024 * 1024)} MiB in answer to {endpoint}, the most "
            "the tool reads of that answer; it stopped reading.",
            hint=hint,
        )

    def _unsendable(self, endpoint: str, exc: Exception) -> AuthError:
        source = f" in {self._auth.source}" if self._auth is not None else ""
        return AuthError(
            f"the request {endpoint} to server '{self.server_name}' cannot be sent ({type(exc).__name__}): a header "
            "value holds a character HTTP headers do not allow, and the headers that vary are the credentials.",
            hint=f"Check the token or user name{source}: printable ASCII letters, digits and punctuation, without "
            "spaces or line endings.",
        )

    def no_answer(self, endpoint: str) -> NetworkError:
        """The error of a request to ``endpoint`` that had no whole answer within this client's timeout: what
        the head start's ``listed_ahead`` raises when the branch list sent ahead was waited for that
        long without the client (which would otherwise wait as long again)."""
        return self._network_error(endpoint, httpx.ReadTimeout("no answer"))

    def _network_error(self, endpoint: str, exc: httpx.TransportError) -> NetworkError:
        base = sanitize_url(self.base_url)
        if isinstance(exc, httpx.TimeoutException):
            return NetworkError(
                f"server '{self.server_name}' did not answer {endpoint} within {self._timeout:g} s ({base}).",
                hint="The server may be overloaded or down; try again later.",
            )
        # Never the exception's text: httpx quotes request data in it (a header value is the token).
        detail = transport_detail(exc)
        if isinstance(exc, httpx.ConnectError):
            reason = tls_reason(exc)
            if reason is not None:
                hint = _TLS_HINTS.get(reason, _TLS_HINT)
            else:
                hint = "Check the url in the manifest, your network, and that the server is running."
                proxy = proxy_variable(self.base_url, os.environ)
                if proxy is not None:
                    hint += (
                        f" {proxy} is set, but the tool connects to servers directly, never through a proxy: run it "
                        "where the server can be reached."
                    )
            return NetworkError(
                f"cannot connect to server '{self.server_name}' at {base} for {endpoint}: {detail}.", hint=hint
            )
        return NetworkError(
            f"the connection to server '{self.server_name}' at {base} broke during {endpoint}: {detail}.",
            hint="The network or the server dropped the connection; try again later.",
        )

    # --- small helpers ---------------------------------------------------------------------------------------

    def _debug(self, line: str) -> None:
        if self._log is not None:
            self._log(redact(line))

    def _log_retry(self, state: RetryCallState) -> None:
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        error = state.outcome.exception() if state.outcome is not None else None
        reason = error.error.message if isinstance(error, _Transient) else "failure"
        self._debug(f"attempt {state.attempt_number} failed ({reason}); retrying in {wait:.1f} s")


class ReadOnlyClient:
    """The reading half of a :class:`ServiceClient`, what planning gets (:class:`gitops.core.remote.RemoteReader`).

    It has no method that writes, so code typed against it cannot upload, clone or activate (mypy checks it).
    """

    def __init__(self, client: ServiceClient) -> None:
        self._client = client

    @property
    def server_name(self) -> str:
        return self._client.server_name

    def list_branches(self) -> list[BranchInfo]:
        """All branches of the account with their active flags."""
        return self._client.list_branches()

    def get_code(self, branch: str) -> CodeSet | None:
        """The modules of ``branch``, or ``None`` when the branch does not exist."""
        return self._client.get_code(branch)


def _limit_of_429(endpoint: str, response: httpx.Response, wait: float) -> Limit:
    """Which limit a 429 is about: the ``X-RateLimit-Limit`` header says; without it, a wait over a minute cannot
    be the global window (it resets every minute), so it is the endpoint's own."""
    own = limit_for(endpoint)
    header = header_number(response.headers.get("X-RateLimit-Limit"))
    if header is not None and header >= 0:
        key = window_key(endpoint, int(header))
    else:
        key = endpoint if own is not None and wait > MINUTE else GLOBAL_KEY
    return own if key == endpoint and own is not None else GLOBAL_LIMIT


#: The writes sent and not answered yet, in words ("the upload to local/main"): what a Ctrl-C may have cut.
_WRITES_IN_FLIGHT: list[str] = []
_WRITES_LOCK = threading.Lock()


#: The writes a Ctrl-C (KeyboardInterrupt) cut while they were in flight.
_WRITES_CUT: list[str] = []


@contextlib.contextmanager
def _in_flight(what: str) -> Iterator[None]:
    with _WRITES_LOCK:
        _WRITES_IN_FLIGHT.append(what)
    try:
        yield
    except KeyboardInterrupt:
        with _WRITES_LOCK:
            _WRITES_CUT.append(what)
        raise
    finally:
        with _WRITES_LOCK:
            _WRITES_IN_FLIGHT.remove(what)


def writes_in_flight() -> list[str]:
    """The writes sent to a server whose answer has not come (yet, or ever: a Ctrl-C cut them); the CLI names them
    when it is interrupted."""
    with _WRITES_LOCK:
        found = [*_WRITES_CUT, *_WRITES_IN_FLIGHT]
        _WRITES_CUT.clear()  # told once
        return found


#: A request body from this size on is sent in pieces that report how much is sent (signs of life).
_PROGRESS_BYTES = 1024 * 1024
_PIECE = 64 * 1024


def _ignore(_text: str) -> None:
    pass


def _pieces(content: bytes, sent: Callable[[int], None]) -> Iterator[bytes]:
    view = memoryview(content)
    for start in range(0, len(content), _PIECE):
        yield bytes(view[start : start + _PIECE])
        sent(min(len(content), start + _PIECE))


def _size_text(count: int) -> str:
    return f"{count / 1_000_000:.1f} MB" if count >= 1_000_000 else f"{count / 1000:.0f} kB"


def transport_detail(exc: BaseException) -> str:
    """The failure's type, with the operating system's or TLS's fixed reason when it lies underneath.

    httpx chains the socket error as the cause; its ``strerror`` ("Connection refused", "Name or service not
    known") and an SSL error's ``reason`` are fixed words that carry no request data, unlike ``str(exc)``.
    """
    name = type(exc).__name__
    for cause in _causes(exc):
        if isinstance(cause, ssl.SSLError) and isinstance(cause.reason, str):
            return f"{name} (TLS: {cause.reason})"
        if isinstance(cause, OSError) and isinstance(cause.strerror, str) and cause.strerror:
            return f"{name} ({cause.strerror})"
    return name


def tls_reason(exc: BaseException) -> str | None:
    """The TLS library's fixed reason (``CERTIFICATE_VERIFY_FAILED``) of a failure whose cause is a TLS error."""
    for cause in _causes(exc):
        if isinstance(cause, ssl.SSLError) and isinstance(cause.reason, str):
            return cause.reason
    return None


def proxy_variable(url: str, environ: Mapping[str, str]) -> str | None:
    """The name (never the value, which may hold a password) of the environment variable that names a proxy for
    ``url`` (``HTTPS_PROXY``, ``ALL_PROXY``, any case, as curl reads them), unless ``NO_PROXY`` exempts its host
    (``*``, the host, or a domain it is in); else ``None``. The tool does not use proxies: this only explains a
    refused connect."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    named = {name.lower(): name for name, value in environ.items() if value and name.lower().endswith("_proxy")}
    for key in (f"{parts.scheme.lower()}_proxy", "all_proxy"):
        if key in named:
            exempt = ",".join(v for k, v in environ.items() if k.lower() == "no_proxy").lower()
            return None if any(_exempts(entry, host) for entry in exempt.split(",")) else named[key]
    return None


def _exempts(entry: str, host: str) -> bool:
    """Whether one ``NO_PROXY`` entry (``*``, ``host``, ``.domain``, ``host:port``) covers ``host``."""
    entry = entry.strip().lstrip(".")
    if entry.count(":") == 1:  # a port, not an IPv6 address
        entry = entry.rsplit(":", 1)[0]
    return bool(entry) and (entry in ("*", host) or host.endswith("." + entry))


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions under ``exc`` (its cause, else its context), nearest first, at most eight."""
    cause = exc.__cause__ or exc.__context__
    for _ in range(8):
        if cause is None:
            return
        yield cause
        cause = cause.__cause__ or cause.__context__


#: What to do about a connect that failed in TLS, by the TLS library's reason (others: :data:`_TLS_HINT`).
_TLS_HINTS = {
    "CERTIFICATE_VERIFY_FAILED": (
        "The server's TLS certificate could not be verified. Check that the url's host is a name the certificate is "
        "for; for a certificate from your own authority, set SSL_CERT_FILE (a PEM file) or SSL_CERT_DIR to it."
    ),
    # What OpenSSL says when the other end answers in plain HTTP.
    "WRONG_VERSION_NUMBER": (
        "The server did not answer in TLS: if it serves plain HTTP (a private server usually does), write the url "
        "with http:// in the manifest."
    ),
}
_TLS_HINT = "The TLS handshake failed: check the url's scheme (https:// only for a server behind TLS) and port."


@dataclass(frozen=True)
class _Encoded:
    """A request body already encoded: its JSON bytes, as :func:`_json_body` would make them."""

    content: bytes


def _branch_written(branch: str, modules: Mapping[str, WireModule]) -> RemoteBranch:
    """What ``branch`` holds once ``modules`` are written to it (stamped by the caller when the server said so), made
    in a background thread while the request is on its way. Raises ``ValueError`` for what is not a module."""
    return RemoteBranch.from_code(branch, CodeSet.from_wire(dict(modules)), 0.0, "own-upload")


def _upload_body(branch: str, modules: Mapping[str, WireModule]) -> dict[str, Any]:
    # Its JSON is gitops.core.codeset.upload_body's, which the local read's child process makes ahead (a test
    # holds the two equal).
    return {"branch": branch, "modules": dict(modules)}


def _clone_body(new_name: str, source: str | None, modules: Mapping[str, WireModule] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"branch": source or "", "newName": new_name}
    if modules is not None and source is None:
        body["defaultModules"] = dict(modules)
    return body


def _json_body(body: Any) -> bytes:
    """Compact UTF-8 JSON of a request body (:func:`gitops.core.codeset.request_body`)."""
    return request_body(body)


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return parse_json(response.content)
    except UnreadableJSON:
        return None


def _json_trouble(response: httpx.Response) -> str:
    """Why a body that looks like JSON is not read (nested too deeply, say), as ``" the tool can read (...)"``."""
    if response.content.lstrip()[:1] not in (b"{", b"["):
        return ""
    try:
        parse_json(response.content)
    except UnreadableJSON as exc:
        return f" the tool can read ({exc})"
    return ""


def _error_words(data: Mapping[str, Any]) -> str:
    error = data.get("error")
    if error is None or error == "":
        return ""
    text = error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)
    return redact(" ".join(text.split()))[:300]


def _describe_body(response: httpx.Response) -> str:
    # Only the start: an answer may be megabytes of words, and splitting all of it would cost many times its size.
    start = response.content[: 4 * _DESCRIBED_CHARS].decode(response.encoding or "utf-8", errors="replace")
    text = start.lstrip()[:_DESCRIBED_CHARS]
    if not text:
        return "an empty answer"
    content_type = response.headers.get("Content-Type", "").split(";", 1)[0].strip() or "no content type"
    title = _HTML_TITLE.search(text)
    if "html" in content_type or text.lstrip().lower().startswith(("<!doctype html", "<html")):
        named = f" titled '{redact(' '.join(title.group(1).split()))[:80]}'" if title else ""
        return f"an HTML page{named}"
    snippet = redact(" ".join(text.split()))[:80]
    return f"{content_type} text starting '{snippet}'"


def _said(response: httpx.Response) -> str:
    text = response.text.strip()
    if not text:
        return ""
    data = _json_or_none(response)
    if isinstance(data, dict) and _error_words(data):
        return f": {_error_words(data)}"
    return f" ({_describe_body(response)})"


def _duration(seconds: float) -> str:
    if seconds > LONGEST_WAIT:
        return "more than a day"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _token_info(data: Mapping[str, Any], now: float) -> TokenInfo:
    """Read the token query's answer, accepting the field spellings seen in clients and the stand-in."""
    raw = data.get("token")
    token: Mapping[str, Any] = raw if isinstance(raw, dict) else data

    def strings(value: Any) -> tuple[str, ...]:
        if isinstance(value, dict):
            return tuple(sorted(str(k) for k, v in value.items() if v))
        if isinstance(value, list):
            return tuple(str(v) for v in value)
        return ()

    segments = token.get("memorySegments", token.get("memory_segments", []))
    # A duration is read first: it does not depend on the two clocks agreeing; an end time is the fallback.
    until: float | None = None
    for key in ("unlimitedSeconds", "unlimited_seconds"):
        value = token.get(key, data.get(key))
        if _number(value):
            until = now + float(value) if value > 0 else None
            break
    else:
        for key in ("unlimitedUntil", "noRateLimitUntil", "unlimited_until"):
            value = token.get(key, data.get(key))
            if _number(value):
                until = float(value) / 1000.0 if value > 1e11 else float(value)
                break
    if until is not None and until <= now:
        until = None
    if until is not None:
        until = min(until, now + LONGEST_WAIT)  # the period is two hours; more than a day is the server's nonsense
    return TokenInfo(
        full=bool(token.get("full")),
        endpoints=strings(token.get("endpoints")),
        websockets=strings(token.get("websockets")),
        memory_segments=tuple(int(s) for s in segments if isinstance(s, int)) if isinstance(segments, list) else (),
        unlimited_until=until,
        unlimited_seconds=max(0.0, until - now) if until is not None else 0.0,
    )


def _number(value: Any) -> bool:
    # JSON may hold 1e400 (inf), NaN or a 400-digit integer: none is a time.
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) < 1e15
    return isinstance(value, int) and abs(value) < 10**15
