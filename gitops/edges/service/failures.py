"""What can go wrong with a request to a game server, and how each failure is worded for the user.

Every failure becomes a :mod:`gitops.errors` exception whose message names the server and the endpoint, says what
the server said (redacted, shortened) and what to do next; never a traceback, never a header or a body that could
carry a secret. The wording is gathered here, apart from the sending (:mod:`gitops.edges.service.client`), so that
a new server quirk (an odd error body, a new status) is answered in one place. :class:`Transient` marks a failure
worth another attempt (:mod:`gitops.edges.service.retries`).
"""

from __future__ import annotations

import json
import os
import re
import ssl
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from gitops.core.endpoints import APPLY_ENDPOINTS, LIST_ENDPOINT, PLAN_ENDPOINTS, SIGNIN, path_of
from gitops.edges.http import UnreadableJSON, parse_json
from gitops.edges.redactlog import scrub_logger
from gitops.edges.service.auth import Login
from gitops.errors import AuthError, GitopsError, NetworkError, ScopeError, ServiceError
from gitops.secrets import redact

__all__ = [
    "Failures",
    "ServerAnswerError",
    "Transient",
    "error_words",
    "lost",
    "proxy_variable",
    "sanitize_url",
    "tls_reason",
    "transport_detail",
]

_HTML_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")
#: How much of an answer that is not JSON is looked at to describe it (an HTML title, the first words).
_DESCRIBED_CHARS = 16 * 1024


class ServerAnswerError(ServiceError):
    """The server answered a well-formed error (``{"error": ...}``); ``server_message`` holds its words."""

    def __init__(self, message: str, *, server_message: str, endpoint: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.server_message = server_message
        self.endpoint = endpoint


class Transient(Exception):
    """A failure worth another attempt; ``error`` is what the user sees when attempts run out. ``sent``: the request
    may have reached the server (False only when no connection was made)."""

    def __init__(self, error: GitopsError, *, sent: bool = True) -> None:
        super().__init__(error.message)
        self.error = error
        self.sent = sent


def lost(error: GitopsError) -> GitopsError:
    """``error`` of a write that may have reached the server and is not sent again (see ``upload_code``)."""
    error.hint = (
        "The server may or may not have taken it; it was not sent again, so that the upload reserved for a rollback "
        "stays unspent. Run 'gitops plan': it downloads the branch and shows whether the upload is still needed."
    )
    return error


# httpx logs every request URL at INFO; the token query's URL carries the token, so every record is scrubbed.
scrub_logger("httpx")


def sanitize_url(url: str) -> str:
    """A URL fit for a log line: no user info, token query values hidden, known secrets redacted."""
    return redact(_USERINFO.sub("", url))


class Failures:
    """The errors of one client: each names its server, and the credentials it was used with."""

    def __init__(self, *, server_name: str, base_url: str, timeout: float, login: Login | None) -> None:
        self.server_name = server_name
        self._base_url = base_url
        self._timeout = timeout
        self._login = login

    # --- authentication --------------------------------------------------------------------------------------

    def refused(self, endpoint: str) -> AuthError:
        """A 401: the credentials are wrong (or there are none)."""
        login = self._login
        if login is None:
            return AuthError(
                f"server '{self.server_name}' needs credentials for {endpoint}, and none were given.",
                hint=f"Name them in servers.{self.server_name} of the manifest (token_env, or username_env and "
                "password_env).",
            )
        return AuthError(
            f"the server refused the credentials for server '{self.server_name}' (401 on {endpoint}); check the "
            f"{login.credentials_words} in {login.source}.",
            hint=login.refused_hint,
        )

    def forbidden(self, endpoint: str, data: Any) -> AuthError:
        """403: for a token, a :class:`ScopeError` naming the endpoint and the scope plan and apply need."""
        login = self._login
        if login is None or not login.scoped:
            words = error_words(data) if isinstance(data, dict) else ""
            return AuthError(
                f"server '{self.server_name}' forbade {endpoint} (403){': ' + words if words else ''}.",
                hint="Check that the account may use this endpoint on that server.",
            )
        return ScopeError(
            f"the token for server '{self.server_name}' may not use {endpoint}; plan needs "
            f"{', '.join(PLAN_ENDPOINTS)} (and {LIST_ENDPOINT} to see which branches are active); apply also needs "
            f"{', '.join(APPLY_ENDPOINTS)} — create a token with those endpoints or a full-access token.",
            hint=f"Tokens are created in the account settings; put the new one in {login.source}.",
        )

    def not_a_token(self, what: str) -> AuthError:
        """``what`` (the token query, the no-rate-limit page) needs a persistent token, and the client has none."""
        return AuthError(
            f"{what} is only for persistent tokens, and server '{self.server_name}' is not used with one.",
            hint="Tokens and rate limits exist on the official servers (token_env in the manifest); private servers "
            "have neither.",
        )

    def no_socket_token(self) -> AuthError:
        """The game socket needs a token, and the client is used without credentials."""
        return AuthError(
            f"server '{self.server_name}' is used without credentials, so its game socket cannot be read.",
            hint="Set token_env (or a user name and password) for the server in the manifest.",
        )

    def no_sign_in(self, source: str) -> AuthError:
        """The sign-in's 404: the server has no screepsmod-auth."""
        return AuthError(
            f"server '{self.server_name}' has no {path_of(SIGNIN)} (404), so the user name and password from "
            f"{source} cannot be used: a password login needs screepsmod-auth's sign-in.",
            hint="Install screepsmod-auth on the private server (see gitops help private-server); on an official "
            "server use a persistent token (token_env) instead.",
        )

    def sign_in_refused(self, source: str, data: Any) -> AuthError:
        """The sign-in's 401, or its answer without ``ok: 1``."""
        words = error_words(data) if isinstance(data, dict) else ""
        return AuthError(
            f"server '{self.server_name}' refused the sign-in with the user name and password from "
            f"{source}{': ' + words if words else ''}.",
            hint="Check the user name (or e-mail) and password; on a private server set the password with "
            "screepsmod-auth (in the server CLI: setPassword('NAME', 'PASSWORD')).",
        )

    def unsendable(self, endpoint: str, exc: Exception) -> AuthError:
        """The request cannot be written: a header value (the credentials) holds what HTTP does not allow."""
        source = f" in {self._login.source}" if self._login is not None else ""
        return AuthError(
            f"the request {endpoint} to server '{self.server_name}' cannot be sent ({type(exc).__name__}): a header "
            "value holds a character HTTP headers do not allow, and the headers that vary are the credentials.",
            hint=f"Check the token or user name{source}: printable ASCII letters, digits and punctuation, without "
            "spaces or line endings.",
        )

    # --- answers ---------------------------------------------------------------------------------------------

    def unexpected_status(self, endpoint: str, response: httpx.Response, data: Any) -> ServiceError:
        """An answer whose status is neither success nor one the client handles itself."""
        status = response.status_code
        if 300 <= status < 400:
            location = sanitize_url(response.headers.get("Location", "elsewhere"))
            return ServiceError(
                f"server '{self.server_name}' redirected {endpoint} to {location}.",
                hint="Put the address it redirects to in the manifest's url (redirects are not followed, so that "
                "credentials only go where the manifest says).",
            )
        words = error_words(data) if isinstance(data, dict) else ""
        said = f": {words}" if words else _said(response)
        hint = None
        if status == 404:
            hint = (
                f"Check that the url '{sanitize_url(self._base_url)}' in the manifest is the game server's base "
                "address, with any path prefix (https://screeps.com/ptr)."
            )
        elif status == 413:
            hint = "The request is too large for the server; the code of a branch must stay under 5 MB."
        return ServiceError(
            f"server '{self.server_name}' answered {status} {response.reason_phrase} to {endpoint}{said}.", hint=hint
        )

    def uncompressed_hint(self) -> str:
        """The hint of a 400 or 415 to a compressed body."""
        return (
            "The server did not read the compressed request body, so nothing was changed. Set "
            f"servers.{self.server_name}.compress to 'never' (or 'auto', which asks the server first) in "
            "the manifest."
        )

    def server_failed(self, endpoint: str, response: httpx.Response) -> NetworkError:
        """A 5xx: the server is down or overloaded (worth another attempt)."""
        return NetworkError(
            f"server '{self.server_name}' answered {response.status_code} {response.reason_phrase} to {endpoint}"
            f"{_said(response)}.",
            hint="The server may be down or overloaded; try again later (the request was retried).",
        )

    def not_json(self, endpoint: str, response: httpx.Response) -> ServiceError:
        """A success whose body is not JSON (an HTML page of a proxy, the wrong address)."""
        return ServiceError(
            f"server '{self.server_name}' answered {endpoint} with {_describe_body(response)} instead of JSON"
            f"{_json_trouble(response)}.",
            hint=f"Check that the url '{sanitize_url(self._base_url)}' in the manifest is the game server's "
            "base address (e.g. https://screeps.com or http://127.0.0.1:21025) and that the server is up.",
        )

    def answer_error(self, endpoint: str, data: Mapping[str, Any]) -> ServerAnswerError:
        """HTTP 200 without ``ok: 1``: the server's own words."""
        words = error_words(data)
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

    def shape_error(self, endpoint: str, reason: str) -> ServiceError:
        """JSON that is not shaped as the interface says."""
        return ServiceError(
            f"server '{self.server_name}' answered {endpoint} with JSON the tool cannot read: {redact(reason)}.",
            hint="Check that the url in the manifest is a Screeps server's base address.",
        )

    def too_large(self, endpoint: str, cap: int) -> ServiceError:
        """An answer over its endpoint's cap: the client stopped reading."""
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

    # --- the network -----------------------------------------------------------------------------------------

    def network_error(self, endpoint: str, exc: httpx.TransportError) -> NetworkError:
        """No answer: a timeout, a refused or failed connection, a connection that broke."""
        base = sanitize_url(self._base_url)
        if isinstance(exc, httpx.TimeoutException):
            return NetworkError(
                f"server '{self.server_name}' did not answer {endpoint} within {self._timeout:g} s ({base}).",
                hint="The server may be overloaded or down; try again later.",
            )
        # Never the exception's text: httpx quotes request data in it (a header value is the token).
        detail = transport_detail(exc)
        if isinstance(exc, httpx.ConnectError):
            return NetworkError(
                f"cannot connect to server '{self.server_name}' at {base} for {endpoint}: {detail}.",
                hint=self._connect_hint(exc),
            )
        return NetworkError(
            f"the connection to server '{self.server_name}' at {base} broke during {endpoint}: {detail}.",
            hint="The network or the server dropped the connection; try again later.",
        )

    def _connect_hint(self, exc: httpx.ConnectError) -> str:
        reason = tls_reason(exc)
        if reason is not None:
            return TLS_HINTS.get(reason, _TLS_HINT)
        hint = "Check the url in the manifest, your network, and that the server is running."
        proxy = proxy_variable(self._base_url, os.environ)
        if proxy is not None:
            hint += (
                f" {proxy} is set, but the tool connects to servers directly, never through a proxy: run it "
                "where the server can be reached."
            )
        return hint


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
TLS_HINTS = {
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


def json_or_none(response: httpx.Response) -> Any:
    """The answer's JSON, or ``None`` when it is not JSON the tool reads."""
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


def error_words(data: Mapping[str, Any]) -> str:
    """The server's ``error``, redacted, on one line, at most 300 characters (empty when it gave none)."""
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
    data = json_or_none(response)
    if isinstance(data, dict) and error_words(data):
        return f": {error_words(data)}"
    return f" ({_describe_body(response)})"
