"""Which servers get the early connection, and what it must be to be the HTTP client's own (issues 23 and 40).

Pure: the route a client of a server's URL takes (host, port, whether TLS runs on it and with which host name and
ALPN), decided from the URL alone, so that :mod:`gitops.edges.early` opens exactly the connection the client's pool
would open and :class:`gitops.app.session.Session` knows where the branch list may be sent ahead.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

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
