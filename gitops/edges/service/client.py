"""The one client of the game service: every request to a server goes through :class:`ServiceClient`.

It owns what every request needs, so that no other module has to think about it (and nothing else imports httpx
for the service). This module holds the requests and their envelopes (HTTP 200 without ``ok: 1`` is an error,
shown with the server's own words); the rest of what a request needs has a module of its own in this package,
which :mod:`gitops.edges.service` lists. The client never writes a file: saving what was learnt is the session's
job, once per logical step. Each request, retries included, ends within ``timeout`` seconds, and each answer is read
up to the cap of its endpoint (:mod:`gitops.edges.http`). Log lines carry method, sanitised URL, status and time,
never headers or bodies; every message is redacted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import ssl
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from gitops.config.credentials import Auth
from gitops.config.logins import header_safe
from gitops.config.manifest import ActiveName
from gitops.core.codeset import CodeSet, WireModule, request_body
from gitops.core.endpoints import (
    ACTIVATE,
    CLONE,
    DOWNLOAD,
    LIST,
    PROBE_BRANCH,
    QUERY_TOKEN,
    SIGNIN,
    answer_cap,
    endpoint_key,
    path_of,
)
from gitops.core.remote import BranchInfo, RemoteBranch, branch_list, normal_stamp
from gitops.core.tokens import TokenInfo, token_info
from gitops.edges.bodies import COMPRESS_MIN_BYTES, BackgroundDeflates, deflate_ahead_body, deflated
from gitops.edges.clock import Clock, SystemClock, Waiting
from gitops.edges.early import EarlyConnection
from gitops.edges.earlypool import use_early
from gitops.edges.headers import CLIENT_HEADERS, KEEPALIVE_SECONDS, REQUEST_SECONDS
from gitops.edges.http import AnswerTooLarge, Connections, send_bounded
from gitops.edges.service.auth import Login, PasswordLogin, login_for
from gitops.edges.service.failures import (
    TLS_HINTS,
    Failures,
    ServerAnswerError,
    Transient,
    json_or_none,
    lost,
    sanitize_url,
    tls_reason,
)
from gitops.edges.service.inflight import in_flight
from gitops.edges.service.observer import Observer, Unobserved
from gitops.edges.service.ratelimits import RateLimits
from gitops.edges.threads import Background
from gitops.edges.tls import trust_context
from gitops.errors import AuthError, NetworkError, RateLimitedError, ServiceError
from gitops.secrets import Secret, redact

if TYPE_CHECKING:  # tenacity is imported when a first attempt fails (gitops.edges.service.retries)
    from tenacity import RetryCallState

__all__ = ["ReadOnlyClient", "ServiceClient"]

#: The longest a client waits for the TLS context its early connection makes first thing (the trust store); past
#: it, it makes its own, and its pool then shakes hands itself on a new connection.
EARLY_CONTEXT_SECONDS = 5.0
#: Attempts of a read (GET) and of a write (POST) when the network or the server fails.
READ_ATTEMPTS = 4
WRITE_ATTEMPTS = 2
#: Backoff between those attempts: 0.5 s, 1 s, 2 s, ... at most 8 s, and at most 30 s of waiting in all.
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 8.0
BACKOFF_TOTAL = 30.0

_SIGNIN = path_of(SIGNIN)
_CODE = path_of(DOWNLOAD)


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
        self._login: Login | None = login_for(auth, sign_in=self._sign_in)
        self._clock: Clock = clock or SystemClock()
        self._observer: Observer = observer if observer is not None else Unobserved(self._clock)
        self._log = log
        self._waiting = waiting or (lambda _what: contextlib.nullcontext(_ignore))
        self._timeout = timeout
        self._deadline = 0.0  # of the request being sent (time.monotonic()); set by _send
        self._fail = Failures(server_name=server_name, base_url=self.base_url, timeout=timeout, login=self._login)
        self._limits = RateLimits(
            server_name=server_name,
            clock=self._clock,
            observer=self._observer,
            max_wait=max_wait,
            on_wait=on_wait,
            debug=self._debug,
            paced=self._login is not None and self._login.paced,
        )
        #: Send uploads (and clones that carry modules) compressed; the session sets it from the manifest's
        #: ``compress`` and what the server is known to take (``gitops.app.session.Session.writer``).
        self.compress = False
        self._ahead = BackgroundDeflates()
        #: The bodies prepare_write encoded, by branch and kind (clone or not), each for the write of those very
        #: modules (by identity) that follows it.
        self._prepared: dict[tuple[str, bool], tuple[Mapping[str, WireModule], bytes]] = {}
        #: The kept-alive connection's socket, for the deadline's watchdog (None: a test's transport, no sockets).
        self._connections: Connections | None = None
        self._early: EarlyConnection | None = None
        if transport is None:
            transport = self._transport(early)
        # Redirects are not followed: httpx would carry X-Token to wherever the redirect points.
        self._http = httpx.Client(
            transport=transport,
            timeout=timeout,
            follow_redirects=False,
            headers=CLIENT_HEADERS,
        )

    def _transport(self, early: EarlyConnection | None) -> httpx.BaseTransport:
        """The connection pool: TLS only for https://, and the early connection as its first connection."""
        self._connections = Connections()
        # An idle connection is dropped after a few seconds, before servers drop theirs (Node's default is 5 s), so
        # that a request never races the server closing the connection it reuses.
        limits = httpx.Limits(keepalive_expiry=KEEPALIVE_SECONDS)
        if self.base_url.lower().startswith("http://"):
            # A plain-HTTP server (a private server, the stand-in) needs no TLS: httpx's default transport would
            # load the whole CA bundle into an SSL context for nothing. This context has no trust store, so the
            # client could not speak TLS to anyone even if a request went to https://.
            transport = httpx.HTTPTransport(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), limits=limits)
        else:
            # httpx's own default, made where the game socket makes its own too (one rule for both); the very
            # context the early connection's TLS handshake used, when it made one (gitops.edges.early).
            made = early.ssl_context(EARLY_CONTEXT_SECONDS) if early is not None else None
            transport = httpx.HTTPTransport(verify=made or trust_context(), limits=limits)
        if early is not None:
            use_early(transport, early, self._connections.remember)
            self._early = early  # closed with the client unless its first connection took it
        return transport

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
        data = self._call("GET", path_of(LIST))
        branches = branch_list(data)
        if branches is None:
            raise self._fail.shape_error(LIST, "'list' is not a list of branches")
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
            raise self._fail.shape_error(endpoint, str(exc)) from None
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
            with in_flight(f"the upload to {self.server_name}/{branch}"):
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
            with in_flight(f"the creation of {self.server_name}/{new_name}"):
                data = self._call("POST", path_of(CLONE), body=prepared or body, compress=self.compress)
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
        with in_flight(f"the activation of {self.server_name}/{branch}"):
            self._call("POST", path_of(ACTIVATE), body={"branch": branch, "activeName": active_name})
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
            self._call("POST", path_of(ACTIVATE), body=body, compress=True, force=True)
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
        filter, and errors are worded without the request (``tests/edges/service/test_query_token.py``)."""
        token = self._persistent_token("The token query")
        data = self._call("GET", path_of(QUERY_TOKEN), params={"token": token.reveal()})
        info = token_info(data, self._clock.now())
        self._observer.set_unlimited_until(info.unlimited_until)
        remember = getattr(self._observer, "remember_scope", None)
        if remember is not None:
            remember(info.full, info.endpoints)
        return info

    def server_version(self) -> dict[str, Any]:
        """The server's ``GET /api/version`` answer (no limit of its own; the global one on the official server):
        what it is (the stand-in says ``standin: true``) and whether it runs code."""
        return self._call("GET", "/api/version")

    def socket_login(self) -> tuple[str, Secret]:
        """The account's user id (``GET /api/auth/me``, counted against the global limit only) and the token that
        the game socket's ``auth`` takes: the persistent token, or on a private server the sign-in's token."""
        data = self._call("GET", "/api/auth/me")
        user_id = data.get("_id")
        if not isinstance(user_id, str) or not re.match(r"^[A-Za-z0-9_-]{1,64}$", user_id):
            raise self._fail.shape_error("GET /api/auth/me", "'_id' is missing or not an id")
        token = self._login.socket_token() if self._login is not None else None
        if token is None:
            raise self._fail.no_socket_token()
        return user_id, token

    def read(self, endpoint: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """One read-only request to ``endpoint`` (a ``"GET /path"`` key) and its answer's object (``ok: 1``): the
        colony copy's reads (:mod:`gitops.edges.service.colonyread`), paced, counted and retried as every request."""
        if not endpoint.startswith("GET "):
            raise ValueError(f"read() only sends GET requests, not {endpoint}")
        return self._call("GET", path_of(endpoint), params=params)

    def no_rate_limit_url(self) -> Secret:
        """The no-rate-limit page for the token; a :class:`Secret` because the link carries the token."""
        token = self._persistent_token("The no-rate-limit page")
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
                self._limits.waited_out(endpoint, response, waits)
                waits += 1
                continue
            if status == 401:
                if not signed_in_again and self._login is not None and self._login.renew():
                    signed_in_again = True
                    continue
                raise self._fail.refused(endpoint)
            return self._envelope(endpoint, response, data)

    def _envelope(self, endpoint: str, response: httpx.Response, data: Any) -> dict[str, Any]:
        """The JSON object of a successful answer with ``ok: 1``; any other answer's error."""
        status = response.status_code
        if status == 403:
            raise self._fail.forbidden(endpoint, data)
        if not 200 <= status < 300:
            error = self._fail.unexpected_status(endpoint, response, data)
            if status in (400, 415) and response.request.headers.get("Content-Encoding"):
                error.hint = self._fail.uncompressed_hint()
            raise error
        if not isinstance(data, dict):
            raise self._fail.shape_error(endpoint, "the answer is JSON but not an object")
        if data.get("ok") != 1:
            raise self._fail.answer_error(endpoint, data)
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
                except Transient as exc:
                    if exc.sent and not resend:
                        raise lost(exc.error) from None  # not a Transient: no retry
                    raise

            try:
                return attempt()
            except Transient as exc:
                failed.append(exc)
            # The rest of the attempts go through tenacity, imported only now.
            from gitops.edges.service.retries import after_first  # noqa: PLC0415 (boundary: tenacity)

            return after_first(
                failed,
                attempt,
                retry_on=Transient,
                attempts=READ_ATTEMPTS if method == "GET" else WRITE_ATTEMPTS,
                backoff=(BACKOFF_FIRST, BACKOFF_MAX, BACKOFF_TOTAL),
                deadline=lambda: self._deadline,
                sleep=self._retry_sleep,
                before_sleep=self._log_retry,
            )
        except Transient as exc:
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
        """One attempt: the request built, paced, counted, sent and its answer checked (:class:`Transient` when
        another attempt may do better)."""
        headers = self._auth_headers(path)
        content = _encoded_body(body, encoding, headers)
        self._pace_and_count(endpoint)
        url = self.base_url + path
        started = time.perf_counter()
        try:
            response = self._exchange(method, url, endpoint, params, content, headers)
        except AnswerTooLarge as exc:
            self._debug(f"{method} {sanitize_url(str(httpx.URL(url, params=params)))} -> over {exc.cap} bytes")
            raise self._fail.too_large(endpoint, exc.cap) from None
        except httpx.DecodingError as exc:
            self._debug(f"{method} {sanitize_url(str(httpx.URL(url, params=params)))} -> {exc}")
            raise Transient(self._fail.shape_error(endpoint, str(exc))) from None
        except (httpx.LocalProtocolError, UnicodeEncodeError) as exc:
            # Not worth another attempt: the request itself cannot be written. The exception's text quotes the
            # offending header value, which is the token or the user name, so only its type is shown.
            self._debug(f"{method} {sanitize_url(str(httpx.URL(url, params=params)))} -> {type(exc).__name__}")
            raise self._fail.unsendable(endpoint, exc) from None
        except httpx.TransportError as exc:
            raise self._transport_failed(method, url, params, endpoint, exc, started) from None
        elapsed = (time.perf_counter() - started) * 1000
        self._debug(f"{method} {sanitize_url(str(response.request.url))} -> {response.status_code} ({elapsed:.0f} ms)")
        self._after_response(endpoint, response)
        return response, self._answer_data(endpoint, response)

    def _pace_and_count(self, endpoint: str) -> None:
        """Pacing, then counting the request as sent (before it is: a budget errs on the safe side)."""
        paced = time.monotonic()
        self._limits.pace()
        # Pacing under the global limit waits for the server's window, not for its answer: the wait (up to a minute)
        # does not count against the request's deadline, which is for the server to answer in.
        self._deadline += time.monotonic() - paced
        self._observer.record_sent(endpoint)

    def _exchange(
        self,
        method: str,
        url: str,
        endpoint: str,
        params: Mapping[str, str] | None,
        content: bytes | None,
        headers: dict[str, str],
    ) -> httpx.Response:
        """Sending: the request goes out (a large body in pieces that say how much is sent) and its answer is read
        within the deadline and the endpoint's cap."""
        big = content is not None and len(content) >= _PROGRESS_BYTES
        sending = f", sending {_size_text(len(content))}" if content is not None and big else ""
        label = f"server '{self.server_name}' to answer {endpoint}{sending}"
        with self._waiting(label) as update:
            payload: bytes | Iterator[bytes] | None = content
            if content is not None and big:
                # Sent in pieces, so that the wait can say how much is sent; the length is known, so the body
                # still goes with a Content-Length (not chunked), exactly as the bytes would.
                headers["Content-Length"] = str(len(content))
                payload = _pieces(content, lambda sent: update(f"{label} ({100 * sent // len(content)}% sent)"))
            request = self._http.build_request(method, url, params=params, content=payload, headers=headers)
            return send_bounded(
                self._http,
                request,
                cap=answer_cap(endpoint),
                deadline=self._deadline,
                connections=self._connections,
            )

    def _transport_failed(
        self,
        method: str,
        url: str,
        params: Mapping[str, str] | None,
        endpoint: str,
        exc: httpx.TransportError,
        started: float,
    ) -> Exception:
        """The error of an attempt that had no answer: :class:`Transient` unless the TLS setup itself is wrong."""
        unconnected = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
        if unconnected:
            # No connection, so no request: the server counted nothing, and neither does the ledger (a day of
            # refused connections must not spend the day's uploads on the tool's own count).
            self._observer.record_unsent(endpoint)
        elapsed = (time.perf_counter() - started) * 1000
        shown = sanitize_url(str(httpx.URL(url, params=params)))
        self._debug(f"{method} {shown} -> {type(exc).__name__} ({elapsed:.0f} ms)")
        error = self._fail.network_error(endpoint, exc)
        if tls_reason(exc) in TLS_HINTS:
            return error  # a certificate or a scheme that is wrong now is as wrong a second later
        return Transient(error, sent=not unconnected)

    def _answer_data(self, endpoint: str, response: httpx.Response) -> Any:
        """Checking the answer: a 5xx or a success that is not JSON is worth another attempt; else its JSON."""
        if response.status_code >= 500:
            raise Transient(self._fail.server_failed(endpoint, response))
        data = json_or_none(response)
        if 200 <= response.status_code < 300 and data is None:
            raise Transient(self._fail.not_json(endpoint, response))
        return data

    def _after_response(self, endpoint: str, response: httpx.Response) -> None:
        if self._login is not None:
            self._login.learn(response)
        self._observer.record_response(endpoint, response.status_code, self._limits.answer_headers(endpoint, response))

    # --- authentication --------------------------------------------------------------------------------------

    def _auth_headers(self, path: str) -> dict[str, str]:
        login = self._login
        if login is None or path == _SIGNIN:
            return {}
        return login.headers()

    def _sign_in(self, login: PasswordLogin) -> None:
        """Sign ``login`` in (``POST /api/auth/signin``), as a request of its own inside the one that needs it."""
        endpoint = endpoint_key("POST", _SIGNIN)
        response, data = self._send("POST", _SIGNIN, endpoint, None, login.sign_in_body())
        status = response.status_code
        if status == 404:
            raise self._fail.no_sign_in(login.source)
        if status == 401 or (status == 200 and isinstance(data, dict) and data.get("ok") != 1):
            raise self._fail.sign_in_refused(login.source, data)
        token = data.get("token") if isinstance(data, dict) else None
        if status != 200:
            raise self._fail.unexpected_status(endpoint, response, data)
        if not isinstance(token, str) or not header_safe(token):
            # Never the body: it is the session token the tool could not use.
            raise self._fail.shape_error(endpoint, "'token' is missing or not printable ASCII")
        login.signed_in(token)

    def _persistent_token(self, what: str) -> Secret:
        token = self._login.persistent_token if self._login is not None else None
        if token is None:
            raise self._fail.not_a_token(what)
        return token

    def _retry_sleep(self, seconds: float) -> None:
        with self._waiting(f"a retry of a request to server '{self.server_name}' (in {seconds:.1f} s)"):
            self._clock.sleep(seconds)

    def no_answer(self, endpoint: str) -> NetworkError:
        """The error of a request to ``endpoint`` that had no whole answer within this client's timeout: what
        the head start's ``listed_ahead`` raises when the branch list sent ahead was waited for that
        long without the client (which would otherwise wait as long again)."""
        return self._fail.network_error(endpoint, httpx.ReadTimeout("no answer"))

    # --- small helpers ---------------------------------------------------------------------------------------

    def _debug(self, line: str) -> None:
        if self._log is not None:
            self._log(redact(line))

    def _log_retry(self, state: RetryCallState) -> None:
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        error = state.outcome.exception() if state.outcome is not None else None
        reason = error.error.message if isinstance(error, Transient) else "failure"
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


#: A request body from this size on is sent in pieces that report how much is sent (signs of life).
_PROGRESS_BYTES = 1024 * 1024
_PIECE = 64 * 1024


def _ignore(_text: str) -> None:
    pass


def _encoded_body(body: Any, encoding: str | None, headers: dict[str, str]) -> bytes | None:
    """Encoding the body: its JSON, deflated when asked (``force``, or ``deflate`` from a size on); the headers that
    describe it are added to ``headers``."""
    if body is None:
        return None
    content = body.content if isinstance(body, _Encoded) else _json_body(body)
    headers["Content-Type"] = "application/json; charset=utf-8"
    if encoding == "force" or (encoding == "deflate" and len(content) >= COMPRESS_MIN_BYTES):
        # The server applies its limits (5 MB of code, 8 MiB of body) to the inflated body, as before.
        content = deflated(content)
        headers["Content-Encoding"] = "deflate"
    return content


def _pieces(content: bytes, sent: Callable[[int], None]) -> Iterator[bytes]:
    view = memoryview(content)
    for start in range(0, len(content), _PIECE):
        yield bytes(view[start : start + _PIECE])
        sent(min(len(content), start + _PIECE))


def _size_text(count: int) -> str:
    return f"{count / 1_000_000:.1f} MB" if count >= 1_000_000 else f"{count / 1000:.0f} kB"


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
