"""One request to a game server, start to finish: the one HTTP path of the game client.

Every request of :class:`gitops.edges.service.client.ServiceClient` goes through :meth:`Exchange.call`: built,
paced and counted by :class:`gitops.edges.service.outgoing.Outgoing` (the code that also writes the branch list the
head start sends ahead), sent through the client's transport (:func:`gitops.edges.service.transport.pool`, or a
test's), read within the deadline and the endpoint's cap (:func:`gitops.edges.http.send_bounded`), retried when
transient (:mod:`gitops.edges.service.retries`), a 429 waited out, a 401 signed in again, and its answer's envelope
checked (HTTP 200 without ``ok: 1`` is an error, shown with the server's own words, :mod:`.failures`). Each
request, retries included, ends within ``timeout`` seconds. Log lines carry method, sanitised URL, status and time,
never headers or bodies; every message is redacted.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from gitops.config.credentials import Auth
from gitops.config.logins import header_safe
from gitops.core.endpoints import SIGNIN, answer_cap, endpoint_key, path_of
from gitops.edges.clock import Clock, Waiting
from gitops.edges.early import Ahead
from gitops.edges.http import AnswerTooLarge, Connections, send_bounded
from gitops.edges.service.auth import PasswordLogin
from gitops.edges.service.failures import (
    TLS_HINTS,
    Failures,
    Transient,
    json_or_none,
    lost,
    sanitize_url,
    tls_reason,
)
from gitops.edges.service.observer import Observer
from gitops.edges.service.outgoing import Outgoing
from gitops.edges.service.requestbodies import PROGRESS_BYTES, encoded_body, pieces, size_text
from gitops.edges.service.transport import in_front, pool
from gitops.errors import NetworkError
from gitops.secrets import redact

if TYPE_CHECKING:  # tenacity is imported when a first attempt fails (gitops.edges.service.retries)
    from tenacity import RetryCallState

__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "BACKOFF_TOTAL", "READ_ATTEMPTS", "WRITE_ATTEMPTS", "Exchange"]

#: Attempts of a read (GET) and of a write (POST) when the network or the server fails.
READ_ATTEMPTS = 4
WRITE_ATTEMPTS = 2
#: Backoff between those attempts: 0.5 s, 1 s, 2 s, ... at most 8 s, and at most 30 s of waiting in all.
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 8.0
BACKOFF_TOTAL = 30.0

_SIGNIN = path_of(SIGNIN)


class Exchange:
    """The requests of one server account, each start to finish (see the module's docstring); what
    :class:`~gitops.edges.service.client.ServiceClient` is given, it is given (``transport`` is the test seam;
    ``early``, a connection opened early, the pool's first connection)."""

    def __init__(
        self,
        *,
        server_name: str,
        base_url: str,
        auth: Auth | None,
        observer: Observer,
        clock: Clock,
        transport: httpx.BaseTransport | None,
        max_wait: float,
        on_wait: Callable[[float, str], None] | None,
        log: Callable[[str], None] | None,
        timeout: float,
        waiting: Waiting | None,
        early: Ahead | None,
    ) -> None:
        self.server_name = server_name
        self.base_url = base_url
        self.clock = clock
        #: Every request's headers, login, pacing, count and an answer's effects (the head start's too).
        self.out = Outgoing.of(
            server_name=server_name,
            url=base_url,
            auth=auth,
            observer=observer,
            clock=clock,
            max_wait=max_wait,
            on_wait=on_wait,
            log=log,
            sign_in=self._sign_in,
        )
        self.login = self.out.login
        self.fail = Failures(server_name=server_name, base_url=base_url, timeout=timeout, login=self.login)
        self._log = log
        self._waiting = waiting or (lambda _what: contextlib.nullcontext(_ignore))
        self._timeout = timeout
        self._deadline = 0.0  # of the request being sent (time.monotonic()); set by _send
        #: The kept-alive connection's socket, for the deadline's watchdog (None: a test's transport, no sockets).
        self.connections: Connections | None = None
        #: The early connection, closed with the client unless its first connection took it.
        self._early = early
        if transport is None:
            self.connections = Connections()
            transport = pool(base_url, early, self.connections)
        else:  # a test's: the head start's request ahead goes through it, in front of it
            transport = in_front(transport, early)
        # Redirects are not followed: httpx would carry X-Token to wherever the redirect points. No headers of its
        # own: each request's are Outgoing.headers's.
        self.http = httpx.Client(transport=transport, timeout=timeout, follow_redirects=False)

    def close(self) -> None:
        """Close the connection pool, and the connection opened early for it if no request ever took it."""
        self.http.close()
        if self._early is not None:
            self._early.close()

    def call(
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
        a failed attempt that may have reached the server is not retried (an upload's, see
        :meth:`gitops.edges.service.client.ServiceClient.upload_code`)."""
        endpoint = endpoint_key(method, path)
        waits = 0
        signed_in_again = False
        encoding = ("force" if force else "deflate") if compress else None
        while True:
            response, data = self._send(method, path, endpoint, params, body, encoding, resend=resend)
            status = response.status_code
            if status == 429:
                self.out.limits.waited_out(endpoint, response, waits)
                waits += 1
                continue
            if status == 401:
                if not signed_in_again and self.login is not None and self.login.renew():
                    signed_in_again = True
                    continue
                raise self.fail.refused(endpoint)
            return self._envelope(endpoint, response, data)

    def _envelope(self, endpoint: str, response: httpx.Response, data: Any) -> dict[str, Any]:
        """The JSON object of a successful answer with ``ok: 1``; any other answer's error."""
        status = response.status_code
        if status == 403:
            raise self.fail.forbidden(endpoint, data)
        if not 200 <= status < 300:
            error = self.fail.unexpected_status(endpoint, response, data)
            if status in (400, 415) and response.request.headers.get("Content-Encoding"):
                error.hint = self.fail.uncompressed_hint()
            raise error
        if not isinstance(data, dict):
            raise self.fail.shape_error(endpoint, "the answer is JSON but not an object")
        if data.get("ok") != 1:
            raise self.fail.answer_error(endpoint, data)
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
        headers = self.out.headers(path)
        content = encoded_body(body, encoding, headers)
        self._pace_and_count(endpoint)
        url = self.base_url + path
        started = time.perf_counter()
        try:
            response = self._transfer(method, url, endpoint, params, content, headers)
        except AnswerTooLarge as exc:
            self.debug(f"{method} {sanitize_url(str(httpx.URL(url, params=params)))} -> over {exc.cap} bytes")
            raise self.fail.too_large(endpoint, exc.cap) from None
        except httpx.DecodingError as exc:
            self.debug(f"{method} {sanitize_url(str(httpx.URL(url, params=params)))} -> {exc}")
            raise Transient(self.fail.shape_error(endpoint, str(exc))) from None
        except (httpx.LocalProtocolError, UnicodeEncodeError) as exc:
            # Not worth another attempt: the request itself cannot be written. The exception's text quotes the
            # offending header value, which is the token or the user name, so only its type is shown.
            self.debug(f"{method} {sanitize_url(str(httpx.URL(url, params=params)))} -> {type(exc).__name__}")
            raise self.fail.unsendable(endpoint, exc) from None
        except httpx.TransportError as exc:
            raise self._transport_failed(method, url, params, endpoint, exc, started) from None
        elapsed = (time.perf_counter() - started) * 1000
        # Worded only when logged: a private server rotates the token with every answer, each new one is registered
        # as a secret, and the redaction's expression is made again after each registration.
        if self._log is not None:
            self.debug(
                f"{method} {sanitize_url(str(response.request.url))} -> {response.status_code} ({elapsed:.0f} ms)"
            )
        self._after_response(endpoint, response)
        return response, self._answer_data(endpoint, response)

    def _pace_and_count(self, endpoint: str) -> None:
        """Pacing, then counting the request as sent (before it is: a budget errs on the safe side)."""
        paced = time.monotonic()
        self.out.pace_and_count(endpoint)
        # Pacing under the global limit waits for the server's window, not for its answer: the wait (up to a minute)
        # does not count against the request's deadline, which is for the server to answer in.
        self._deadline += time.monotonic() - paced

    def _transfer(
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
        big = content is not None and len(content) >= PROGRESS_BYTES
        sending = f", sending {size_text(len(content))}" if content is not None and big else ""
        label = f"server '{self.server_name}' to answer {endpoint}{sending}"
        with self._waiting(label) as update:
            payload: bytes | Iterator[bytes] | None = content
            if content is not None and big:
                # Sent in pieces, so that the wait can say how much is sent; the length is known, so the body
                # still goes with a Content-Length (not chunked), exactly as the bytes would.
                headers["Content-Length"] = str(len(content))
                payload = pieces(content, lambda sent: update(f"{label} ({100 * sent // len(content)}% sent)"))
            request = self.http.build_request(method, url, params=params, content=payload, headers=headers)
            return send_bounded(
                self.http,
                request,
                cap=answer_cap(endpoint),
                deadline=self._deadline,
                connections=self.connections,
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
            self.out.observer.record_unsent(endpoint)
        elapsed = (time.perf_counter() - started) * 1000
        shown = sanitize_url(str(httpx.URL(url, params=params)))
        self.debug(f"{method} {shown} -> {type(exc).__name__} ({elapsed:.0f} ms)")
        error = self.fail.network_error(endpoint, exc)
        if tls_reason(exc) in TLS_HINTS:
            return error  # a certificate or a scheme that is wrong now is as wrong a second later
        return Transient(error, sent=not unconnected)

    def _answer_data(self, endpoint: str, response: httpx.Response) -> Any:
        """Checking the answer: a 5xx or a success that is not JSON is worth another attempt; else its JSON."""
        if response.status_code >= 500:
            raise Transient(self.fail.server_failed(endpoint, response))
        data = json_or_none(response)
        if 200 <= response.status_code < 300 and data is None:
            raise Transient(self.fail.not_json(endpoint, response))
        return data

    def _after_response(self, endpoint: str, response: httpx.Response) -> None:
        self.out.answered(endpoint, response)

    # --- authentication --------------------------------------------------------------------------------------

    def _sign_in(self, login: PasswordLogin) -> None:
        """Sign ``login`` in (``POST /api/auth/signin``), as a request of its own inside the one that needs it."""
        endpoint = endpoint_key("POST", _SIGNIN)
        response, data = self._send("POST", _SIGNIN, endpoint, None, login.sign_in_body())
        status = response.status_code
        if status == 404:
            raise self.fail.no_sign_in(login.source)
        if status == 401 or (status == 200 and isinstance(data, dict) and data.get("ok") != 1):
            raise self.fail.sign_in_refused(login.source, data)
        token = data.get("token") if isinstance(data, dict) else None
        if status != 200:
            raise self.fail.unexpected_status(endpoint, response, data)
        if not isinstance(token, str) or not header_safe(token):
            # Never the body: it is the session token the tool could not use.
            raise self.fail.shape_error(endpoint, "'token' is missing or not printable ASCII")
        login.signed_in(token)

    def _retry_sleep(self, seconds: float) -> None:
        with self._waiting(f"a retry of a request to server '{self.server_name}' (in {seconds:.1f} s)"):
            self.clock.sleep(seconds)

    # --- small helpers ---------------------------------------------------------------------------------------

    def debug(self, line: str) -> None:
        if self._log is not None:
            self._log(redact(line))

    def _log_retry(self, state: RetryCallState) -> None:
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        error = state.outcome.exception() if state.outcome is not None else None
        reason = error.error.message if isinstance(error, Transient) else "failure"
        self.debug(f"attempt {state.attempt_number} failed ({reason}); retrying in {wait:.1f} s")

    def no_answer(self, endpoint: str) -> NetworkError:
        """The error of a request to ``endpoint`` that had no whole answer within this client's timeout: what
        the head start's ``listed_ahead`` raises when the branch list sent ahead was waited for that
        long without the client (which would otherwise wait as long again)."""
        return self.fail.network_error(endpoint, httpx.ReadTimeout("no answer"))


def _ignore(_text: str) -> None:
    pass
