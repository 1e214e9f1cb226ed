"""Which route a client of a server's URL takes (``gitops.core.early``): what the early connection must open to be
the one the HTTP client's pool would open."""

from __future__ import annotations

import httpx
import pytest

from gitops.core.early import ALPN, MOST, Route, early_route, reads_ahead, route_of, side_connections


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


def test_no_early_route_when_the_plan_may_ask_nothing() -> None:
    assert early_route("https://screeps.com", "never") is None
    assert early_route("https://screeps.com", "auto") == Route("screeps.com", 443, tls=True)
    assert early_route("ftp://example.org", "always") is None


def test_reads_ahead_of_a_first_contact() -> None:
    # the token query and, on the official server, the downloads of the branches the ledger does not know
    assert reads_ahead(refresh="auto", rate_limited=True, scope_known=False, unknown=["a", "b"], official=True) == (
        True,
        ["a", "b"],
    )
    # at most MOST in all
    many = [f"b{i}" for i in range(5)]
    query, downloads = reads_ahead(refresh="auto", rate_limited=True, scope_known=False, unknown=many, official=True)
    assert int(query) + len(downloads) == MOST
    assert reads_ahead(refresh="auto", rate_limited=True, scope_known=True, unknown=many, official=True) == (
        False,
        many[:MOST],
    )
    # elsewhere the branch list is the download
    assert reads_ahead(refresh="auto", rate_limited=True, scope_known=False, unknown=["a"], official=False) == (
        True,
        [],
    )


def test_no_reads_ahead_for_a_sign_in_or_without_requests() -> None:
    assert reads_ahead(refresh="auto", rate_limited=False, scope_known=False, unknown=["a"], official=True) == (
        False,
        [],
    )
    assert reads_ahead(refresh="never", rate_limited=True, scope_known=False, unknown=["a"], official=True) == (
        False,
        [],
    )


def test_side_connections_follow_the_reads_ahead() -> None:
    assert side_connections(refresh="auto", rate_limited=True, first_contact=True, branches=1) == 2
    assert side_connections(refresh="auto", rate_limited=True, first_contact=True, branches=9) == MOST
    # a known server, a sign-in, a plan that asks nothing: none
    assert side_connections(refresh="auto", rate_limited=True, first_contact=False, branches=1) == 0
    assert side_connections(refresh="auto", rate_limited=False, first_contact=True, branches=1) == 0
    assert side_connections(refresh="never", rate_limited=True, first_contact=True, branches=1) == 0
