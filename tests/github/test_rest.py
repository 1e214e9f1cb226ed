"""The requests to GitHub (:mod:`gitops.github.rest`): the token goes to the API's origin only, answers are bounded,
and refusals are worded with what to change; GitHub is faked at the httpx transport seam."""

from __future__ import annotations

import httpx
import pytest

from gitops.github.rest import ANSWER_CAP, GitHubError, GitHubPermissionError, RestClient, answer_json
from gitops.secrets import Secret

API = "https://ghe.example.test/api/v3"
TOKEN = "ghs_rest-test-token-0123456789"


def _client(handler: httpx.MockTransport) -> RestClient:
    return RestClient(Secret(TOKEN), "alice/bot", api_url=API, transport=handler)


def test_the_token_goes_to_the_apis_origin_and_nowhere_else() -> None:
    seen: list[tuple[str, str | None]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.headers.get("Authorization")))
        return httpx.Response(200, json={"ok": True})

    with _client(httpx.MockTransport(handle)) as gh:
        assert answer_json(gh.call("GET", "/user", what="ask"), "ask") == {"ok": True}
        assert gh.is_home(f"{API}/repos?page=2")
        assert not gh.is_home("http://ghe.example.test/api/v3/repos")  # another scheme
        assert not gh.is_home("https://ghe.example.test:8443/api/v3/repos")  # another port
        with pytest.raises(GitHubError, match=r"refused to send the GitHub token to https://elsewhere\.test"):
            gh.call("GET", "https://elsewhere.test/steal", what="follow a link")
    assert seen == [(f"{API}/user", f"Bearer {TOKEN}")]


def test_an_answer_over_its_cap_is_an_error_not_a_read_without_end() -> None:
    body = b"x" * (ANSWER_CAP + 1)
    transport = httpx.MockTransport(lambda r: httpx.Response(200, content=body))
    with _client(transport) as gh, pytest.raises(GitHubError, match="more than 1 MiB in answer to read it") as too_big:
        gh.call("GET", "/big", what="read it")
    assert too_big.value.hint is not None
    assert "GITHUB_API_URL" in too_big.value.hint


def test_refusals_say_what_to_change() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        status = 401 if request.method == "GET" else 403
        return httpx.Response(status, json={"message": "Bad credentials" if status == 401 else "Forbidden"})

    with _client(httpx.MockTransport(handle)) as gh:
        with pytest.raises(GitHubError) as bad:
            gh.call("GET", "/user", what="learn who the token is")
        with pytest.raises(GitHubPermissionError) as refused:
            gh.call("POST", "/repos/a/b/issues", what="open an issue", permission="issues: write")
    assert bad.value.status == 401
    assert "not a valid token" in (bad.value.hint or "")
    assert refused.value.message == "GitHub refused to open an issue: 403 Forbidden"
    assert "permissions: issues: write" in (refused.value.hint or "")


def test_an_answer_that_is_not_json_is_an_error_naming_what_came() -> None:
    page = httpx.Response(200, content=b"<html>proxy</html>", headers={"content-type": "text/html"})
    with pytest.raises(GitHubError, match=r"with something that is not JSON \(text/html, 18 bytes\)"):
        answer_json(page, "read the comments")
