"""Proxies: the tool connects to servers directly (its HTTP client is given its own transport, so httpx does not
read ``HTTP_PROXY`` and the like). A refused connect on a machine where such a variable names a proxy for the
server says so, by the variable's name only: its value may carry a password."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from gitops.edges.service.failures import proxy_variable
from gitops.errors import ExitCode
from gitops.standin.testing import FULL_TOKEN, StandIn
from tests.project import one_branch_project

CANARY = "proxy-password-canary-5c1d"


@pytest.mark.parametrize(
    ("url", "environ", "named"),
    [
        ("https://screeps.com", {"HTTPS_PROXY": "http://u:p@proxy:3128"}, "HTTPS_PROXY"),
        ("http://127.0.0.1:21025", {"http_proxy": "http://proxy:3128"}, "http_proxy"),
        ("http://127.0.0.1:21025", {"HTTPS_PROXY": "http://proxy:3128"}, None),  # another scheme's
        ("http://127.0.0.1:21025", {"ALL_PROXY": "socks5://proxy:1080"}, "ALL_PROXY"),
        ("http://127.0.0.1:21025", {"ALL_PROXY": "socks5://proxy:1080", "HTTP_PROXY": ""}, "ALL_PROXY"),
        ("https://screeps.com", {"HTTPS_PROXY": "http://proxy", "NO_PROXY": "*"}, None),
        ("https://screeps.com", {"HTTPS_PROXY": "http://proxy", "no_proxy": "localhost, .screeps.com"}, None),
        ("https://www.screeps.com", {"HTTPS_PROXY": "http://proxy", "NO_PROXY": "screeps.com"}, None),
        ("https://notscreeps.com", {"HTTPS_PROXY": "http://proxy", "NO_PROXY": "screeps.com"}, "HTTPS_PROXY"),
        ("http://127.0.0.1:21025", {"HTTP_PROXY": "http://proxy", "NO_PROXY": "127.0.0.1:21025"}, None),
        ("http://[::1]:21025", {"HTTP_PROXY": "http://proxy", "NO_PROXY": "::1"}, None),
        ("http://127.0.0.1:21025", {}, None),
    ],
)
def test_the_variable_that_names_a_proxy_for_a_url(url: str, environ: dict[str, str], named: str | None) -> None:
    assert proxy_variable(url, environ) == named


def _refused_url() -> str:
    with socket.socket() as probe:  # a loopback port with nobody listening once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("exempt", [False, True], ids=["proxy-named", "host-exempted"])
def test_a_refused_connect_names_the_proxy_variable_the_tool_does_not_use(
    exempt: bool,
    tmp_path: Path,
    standin: StandIn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://someone:{CANARY}@127.0.0.1:9")
    if exempt:
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    p = one_branch_project(tmp_path, standin, capsys, monkeypatch)
    p.point_at(_refused_url())
    result = p.apply("--yes")
    assert result.code == ExitCode.FAILURE, (result.code, result.err)
    assert "cannot connect to server 'local'" in result.err
    assert ("HTTP_PROXY is set, but the tool connects to servers directly" in result.err) is not exempt
    assert "Traceback" not in result.err
    assert CANARY not in result.out + result.err
    assert FULL_TOKEN not in result.out + result.err
