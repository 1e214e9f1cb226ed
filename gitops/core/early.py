"""Which servers get the early connection, what it must be to be the HTTP client's own (issues 23 and 40), and what
a first contact asks ahead on side connections.

Pure: the route a client of a server's URL takes (host, port, whether TLS runs on it and with which host name and
ALPN), decided from the URL alone, so that :mod:`gitops.edges.early` opens exactly the connection the client's pool
would open; whether a server gets one (:func:`early_route`, asked both by the connects begun before the local read's
fork and by the head start); and a first contact's reads ahead (:func:`reads_ahead`) and the side connections opened
early for them (:func:`side_connections`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

#: The most reads sent ahead per server (and so side connections opened early for it).
MOST = 3

#: The protocols the HTTP client's pool offers in the TLS handshake (ALPN): httpx's transport with HTTP/2 off, for
#: which httpcore offers ``["http/1.1"]``. The early handshake offers the same; ``tests/edges/test_tls.py`` checks that
#: a server offering HTTP/2 as well agrees on the same protocol with both.
ALPN = ("http/1.1",)


@dataclass(frozen=True)
class Route:
    """Where a client of a URL connects (``host``, ``port``) and whether TLS runs on that connection. With TLS, the
    host name the handshake gives (SNI, and the name the certificate must be for) is ``host``: the URL's host, as the
    pool gives it (``httpx.URL(...).host``, lower case, no brackets)."""

    host: str
    port: int
    tls: bool

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def server_hostname(self) -> str:
        return self.host


def route_of(url: str) -> Route | None:
    """The :class:`Route` of a client of ``url``; ``None`` for what it cannot tell (no host, a bad port, another
    scheme) and for an ``https://`` URL whose host is not ASCII (the pool would give its IDNA form: the early
    connection is not guessed at)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if not host or scheme not in ("http", "https"):
        return None
    tls = scheme == "https"
    if tls and not host.isascii():
        return None
    return Route(host, port or (443 if tls else 80), tls)


def early_route(url: str, refresh: str) -> Route | None:
    """The route of the connection to open early for a server at ``url``: its :func:`route_of`, and ``None`` with
    ``--refresh=never`` (a plan that may ask nothing)."""
    return None if refresh == "never" else route_of(url)


def reads_ahead(
    *, refresh: str, rate_limited: bool, scope_known: bool, unknown: Sequence[str], official: bool
) -> tuple[bool, list[str]]:
    """What planning a server will ask that can be asked ahead, beside its branch list: the token query (when the
    token's scope is not known) and the downloads of the branches the ledger knows nothing of (``unknown``, only on
    an official server, whose list carries no code: elsewhere the list is the download); at most :data:`MOST` in
    all. Only for a rate-limited login (a token: a sign-in has no scope, and its server no limits to spare), and
    nothing with ``--refresh=never``."""
    if refresh == "never" or not rate_limited:
        return False, []
    query = not scope_known
    downloads = list(unknown) if official else []
    return query, downloads[: MOST - int(query)]


def side_connections(*, refresh: str, rate_limited: bool, first_contact: bool, branches: int) -> int:
    """How many side connections to open early for a server, before its ledger is read: for a first contact (no
    ledger of any account for its URL, so that planning asks it everything) of a login that gets reads ahead
    (:func:`reads_ahead`), one for the token query and one a branch the manifest deploys there, at most
    :data:`MOST`; else none."""
    if refresh == "never" or not rate_limited or not first_contact:
        return 0
    return min(MOST, 1 + branches)
