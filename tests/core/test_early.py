"""Which route a client of a server's URL takes (``gitops.core.early``): what the early connection must open to be
the one the HTTP client's pool would open."""

from __future__ import annotations

import httpx
import pytest

from gitops.core.early import ALPN, Route, route_of


@pytest.mark.parametrize(
    ("url", "route"),
    [
        ("http://127.0.0.1:21025", Route("127.0.0.1", 21025, tls=False)),
        ("https://screeps.com", Route("screeps.com", 443, tls=True)),
        ("HTTPS://Screeps.COM/season/", Route("screeps.com", 443, tls=True)),
        ("https://[::1]:8443/", Route("::1", 8443, tls=True)),
        ("http://example.org", Route("example.org", 80, tls=False)),
        ("ftp://example.org", None),
        ("http://127.0.0.1:99999", None),
        ("https://", None),
        ("https://bücher.example", None),  # the pool would give its IDNA form: not guessed at
    ],
)
def test_routes(url: str, route: Route | None) -> None:
    assert route_of(url) == route


@pytest.mark.parametrize("url", ["https://screeps.com/season/", "https://[::1]:8443", "https://Screeps.COM"])
def test_the_host_name_is_the_one_the_pool_gives(url: str) -> None:
    """httpcore gives ``start_tls`` the request URL's host as httpx spells it."""
    route = route_of(url)
    assert route is not None
    assert route.server_hostname == httpx.URL(url).host
    assert route.port == httpx.URL(url).port or route.port == 443


def test_the_alpn_is_http_1_1_only() -> None:
    """The client's transport has HTTP/2 off, for which httpcore offers ``["http/1.1"]`` (tests/edges/test_tls.py checks
    it against a server that offers HTTP/2 too)."""
    assert ALPN == ("http/1.1",)
